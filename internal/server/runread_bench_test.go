package server_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// BenchmarkRunRead is one go-tfe Runs.Read of an applied run after
// another, server and client in this process, on SQLite: what each poll
// of a run costs (bench (a) polls every 10 ms while the run's terraform
// waits for the CPU).
func BenchmarkRunRead(b *testing.B) {
	// go-tfe paces itself to the advertised rate limit: raised out of the way.
	e := testenv.New(b, testenv.Options{Configure: func(c *server.Config) { c.RateLimitPerToken, c.RateLimitPerAddress = 1e6, 1e6 }})
	ctx := context.Background()
	testenv.NewOrg(b, e.Client, "rb")
	ws, err := e.Client.Workspaces.Create(ctx, "rb", tfe.WorkspaceCreateOptions{Name: tfe.String("w"), AutoApply: tfe.Bool(true)})
	if err != nil {
		b.Fatal(err)
	}
	cv := testenv.UploadConfig(ctx, b, e.Client, ws.ID, `resource "terraform_data" "a" {}`)
	r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
	if err != nil {
		b.Fatal(err)
	}
	testenv.WaitRun(ctx, b, e.Client, r.ID, tfe.RunApplied)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Client.Runs.Read(ctx, r.ID); err != nil {
			b.Fatal(err)
		}
	}
}
