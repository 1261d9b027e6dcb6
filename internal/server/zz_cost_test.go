package server_test

import (
	"context"
	"fmt"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

func TestZZCosts(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	testenv.NewOrg(t, e.Client, "zc")
	c, _ := e.UserClient(t, "zc", "u@zc.test", ownersTeam(t, e, "zc"))
	ws, err := e.Client.Workspaces.Create(ctx, "zc", tfe.WorkspaceCreateOptions{Name: tfe.String("w"), AutoApply: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "a" {}
output "o" { value = "v" }`)
	r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, c, r.ID, tfe.RunApplied)
	sv, _ := c.StateVersions.ReadCurrent(ctx, ws.ID)
	calls := []struct {
		name string
		f    func() error
	}{
		{"StateVersions.ReadCurrent", func() error { _, err := c.StateVersions.ReadCurrent(ctx, ws.ID); return err }},
		{"StateVersions.Read", func() error { _, err := c.StateVersions.Read(ctx, sv.ID); return err }},
		{"StateVersionOutputs.ReadCurrent", func() error { _, err := c.StateVersionOutputs.ReadCurrent(ctx, ws.ID); return err }},
		{"Runs.List", func() error { _, err := c.Runs.List(ctx, ws.ID, nil); return err }},
		{"ConfigurationVersions.Read", func() error { _, err := c.ConfigurationVersions.Read(ctx, cv.ID); return err }},
	}
	for _, call := range calls {
		least := int64(1 << 30)
		for i := range 5 {
			if i == 4 {
				fmt.Println("XMARK", call.name)
			}
			before := e.Server.DB.Queries()
			if err := call.f(); err != nil {
				t.Fatalf("%s: %v", call.name, err)
			}
			least = min(least, e.Server.DB.Queries()-before)
		}
		fmt.Printf("COST %-34s %d\n", call.name, least)
	}
}
