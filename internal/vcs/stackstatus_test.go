package vcs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/vcs"
)

// TestStackRunStatus: in the transaction that gives a deployment run a
// status, a run of a configuration made of a commit queues that status
// for the commit (pending "Planning" when made, nothing new when its plan
// starts, error "Deployment abandoned" when abandoned), and a status not
// yet posted is dropped when the next comes, so that one retried after a
// failure never posts over a newer one; a run of a configuration made of
// no commit queues nothing. Both stores. (TestVCSBackedStackRunStatuses in
// internal/stack sees the statuses at a real Gitea.)
func TestStackRunStatus(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		o := testenv.NewOrg(t, c, "acme")
		prj, err := c.Projects.Create(ctx, o.Name, tfe.ProjectCreateOptions{Name: "platform"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "app", Project: &tfe.Project{ID: prj.ID}})
		if err != nil {
			t.Fatal(err)
		}
		const sha = "0123456789abcdef0123456789abcdef01234567"
		// Configurations as the VCS fetch makes them (their archives do
		// not parse: they make no runs of their own); only the first is
		// a commit's.
		fromCommit, err := e.Server.Stacks.ConfigureFromArchive(ctx, st.ID, []byte("not an archive"), false,
			func(ctx context.Context, q store.Q, id string) error {
				_, err := q.Exec(ctx, `INSERT INTO vcs_stack_configurations (configuration_id, stack_id, organization_name, stack_name, oauth_token_id,
					identifier, sha, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, st.ID, "acme", "app", "ot-1", "acme/app", sha, core.Micros(core.Now()))
				return err
			})
		if err != nil {
			t.Fatal(err)
		}
		uploaded, err := e.Server.Stacks.ConfigureFromArchive(ctx, st.ID, []byte("not an archive"), false, nil)
		if err != nil {
			t.Fatal(err)
		}

		type queued struct {
			Key         string
			State, Desc string
			Context     string
			TargetURL   string
			SHA         string
		}
		lane := func(q store.Q, runID string) []queued {
			t.Helper()
			items, err := store.All(ctx, q, func(sc store.Scanner) (queued, error) {
				var it queued
				var payload string
				if err := sc.Scan(&it.Key, &payload); err != nil {
					return it, err
				}
				var p struct {
					SHA    string
					Status struct{ State, Description, Context, TargetURL string }
				}
				err := json.Unmarshal([]byte(payload), &p)
				it.State, it.Desc, it.Context, it.TargetURL, it.SHA = p.Status.State, p.Status.Description, p.Status.Context, p.Status.TargetURL, p.SHA
				return it, err
			}, `SELECT item_key, payload FROM outbox_items WHERE topic = 'vcs' AND lane = ? ORDER BY item_key`, "status:"+runID)
			if err != nil {
				t.Fatal(err)
			}
			return items
		}
		want := func(q store.Q, runID, key, state, desc string) {
			t.Helper()
			items := lane(q, runID)
			if len(items) != 1 {
				t.Fatalf("the queue holds %+v for run %s, want only its %s status", items, runID, key)
			}
			it := items[0]
			if it.Key != "status:"+runID+":"+key || it.State != state || it.Desc != desc || it.Context != "Terrace/acme/app/only" ||
				it.TargetURL != e.URL+"/app/acme/stack-runs/"+runID || it.SHA != sha {
				t.Fatalf("the queued status of run %s is %+v, want %s %q on %s", runID, it, state, desc, sha)
			}
		}
		rollback := errors.New("rollback")
		err = e.Server.DB.Tx(ctx, func(tx *store.Tx) error {
			// Rolled back at the end: the queue never sees these.
			r := vcs.StackRun{ID: "sdr-made", ConfigurationID: fromCommit.ID, Deployment: "only", Status: stack.RunPending}
			if err := e.Server.VCS.StackRunStatus(ctx, tx, r); err != nil {
				return err
			}
			want(tx, r.ID, "pending", "pending", "Planning")
			r.Status = stack.RunPreDeploying
			if err := e.Server.VCS.StackRunStatus(ctx, tx, r); err != nil {
				return err
			}
			want(tx, r.ID, "pending", "pending", "Planning")
			r.Status = stack.RunAbandoned
			if err := e.Server.VCS.StackRunStatus(ctx, tx, r); err != nil {
				return err
			}
			want(tx, r.ID, "abandoned", "error", "Deployment abandoned")

			other := vcs.StackRun{ID: "sdr-uploaded", ConfigurationID: uploaded.ID, Deployment: "only", Status: stack.RunPending}
			if err := e.Server.VCS.StackRunStatus(ctx, tx, other); err != nil {
				return err
			}
			if items := lane(tx, other.ID); len(items) != 0 {
				t.Fatalf("an uploaded configuration's run queued %+v, want nothing", items)
			}
			return rollback
		})
		if !errors.Is(err, rollback) {
			t.Fatal(err)
		}
	})
}
