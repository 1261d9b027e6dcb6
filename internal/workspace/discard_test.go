package workspace_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestDiscardTakesOnlyAJustMadeWorkspace: Discard (a no-code provision's
// undo, which asks no permission) removes a workspace with nothing in it,
// and refuses one that is locked or has a run: that is no longer a
// workspace just made.
func TestDiscardTakesOnlyAJustMadeWorkspace(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		mk := func(name string) *tfe.Workspace {
			w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		fresh, locked, ran := mk("fresh"), mk("locked"), mk("ran")
		if _, err := c.Workspaces.Lock(ctx, locked.ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, c, ran.ID, `resource "terraform_data" "a" {}`)
		if _, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ran, ConfigurationVersion: cv}); err != nil {
			t.Fatal(err)
		}

		// The reads beside it (the current run, the state's resources) are
		// those of a caller who sees the workspace: a site admin here.
		site := testenv.AsSiteAdmin(ctx)
		if err := e.Server.Workspaces.Discard(site, fresh.ID); err != nil {
			t.Fatalf("discarding a workspace with nothing in it: %v", err)
		}
		if _, err := c.Workspaces.ReadByID(ctx, fresh.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("the discarded workspace: %v, want not found", err)
		}
		for _, w := range []struct {
			ws   *tfe.Workspace
			want string
		}{{locked, "locked"}, {ran, "has a run"}} {
			err := e.Server.Workspaces.Discard(site, w.ws.ID)
			if core.KindOf(err) != core.KindConflict || !strings.Contains(err.Error(), w.want) {
				t.Errorf("discarding %s: %v, want a conflict saying it %s", w.ws.Name, err, w.want)
			}
			if _, err := c.Workspaces.ReadByID(ctx, w.ws.ID); err != nil {
				t.Errorf("workspace %s after a refused discard: %v", w.ws.Name, err)
			}
		}
	})
}
