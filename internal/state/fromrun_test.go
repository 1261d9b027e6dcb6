package state_test

import (
	"context"
	"io"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestRefusedRunStateErrorsTheRun: when the state an apply left cannot be
// stored (here: larger than the server takes), the run errors and says
// why, no state version appears, and the apply's log (folded beside the
// state upload, before the failure was known) ends with the reason; on
// both stores.
func TestRefusedRunStateErrorsTheRun(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "big")
		ws, err := e.Client.Workspaces.Create(ctx, "big", tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "a" { input = "a value" }`)
		e.Server.States.SetMaxSize(64)
		r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, AutoApply: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		r = testenv.WaitRun(ctx, t, e.Client, r.ID, tfe.RunErrored)
		if sr, err := e.Server.Runs.System(ctx, r.ID); err != nil || !strings.HasPrefix(sr.ErrorMessage, "storing the new state failed") {
			t.Errorf("the errored run's message: %v, %v; want that storing the state failed", sr, err)
		}
		if _, err := e.Client.StateVersions.ReadCurrent(ctx, ws.ID); err == nil {
			t.Error("a state version exists for a state that could not be stored")
		}
		lr, err := e.Client.Applies.Logs(ctx, r.Apply.ID)
		if err != nil {
			t.Fatal(err)
		}
		log, err := io.ReadAll(lr)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		if !strings.Contains(string(log), "Apply complete!") || !strings.HasPrefix(lines[len(lines)-1], "storing the new state failed") {
			t.Errorf("the apply log should hold terraform's output and end with why the run errored; it is:\n%s", log)
		}
	})
}
