package orchestration

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestDeployBesideOtherDeploy: a deployment started while another of the
// same environment is being stored (its transaction not yet committed)
// sees it and is refused. Before (2026-11-30), on PostgreSQL, both counted
// no deployment in progress and both ran. Both stores; SQLite's
// transactions never overlap.
func TestDeployBesideOtherDeploy(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx, s, now := besideEnvironment(t, db)
		// The other deployment's transaction, as Deploy's: held open once
		// its deployment is inserted.
		err := storetest.Beside(t, db, deploying(ctx, "dep-other", now), func() error {
			// A destroy: nothing to compile, and (never deployed) nothing to run.
			_, err := s.Deploy(ctx, "acme", DeployRequest{ProjectID: "shop", EnvID: "dev", Mode: ModeDestroy})
			return err
		})
		if core.KindOf(err) != core.KindConflict {
			t.Fatalf("a deployment beside another of the environment: %v, want a conflict (a deployment in progress)", err)
		}
	})
}

// noWorkspaces is an organization whose environments' workspaces go in
// its default project, where the caller may create them.
type noWorkspaces struct{ Workspaces }

func (noWorkspaces) Project(context.Context, string) (string, error)   { return "prj-default", nil }
func (noWorkspaces) CheckCreate(context.Context, string, string) error { return nil }

// TestDeleteBesideDeploy: an environment's delete while a deployment of it
// is being stored (its transaction not yet committed) waits for it and is
// refused, and the deployment stays. Before (2026-11-30), on PostgreSQL,
// the delete checked in a transaction of its own, saw nothing in progress
// and deleted the environment under the running deployment. Both stores.
func TestDeleteBesideDeploy(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx, s, now := besideEnvironment(t, db)
		// The deployment's transaction, as Deploy's: held open once its
		// deployment is inserted.
		err := storetest.Beside(t, db, deploying(ctx, "dep-running", now), func() error {
			return s.Delete(ctx, "acme", KindEnvironment, "shop", "dev")
		})
		if core.KindOf(err) != core.KindConflict {
			t.Fatalf("a delete beside a deployment of the environment: %v, want a conflict (a deployment in progress)", err)
		}
		var envs, deps int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM orchestrator_objects WHERE organization_name = ? AND kind = ? AND scope = ? AND id = ?`, "acme", KindEnvironment, "shop", "dev").Scan(&envs); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM orchestrator_deployments WHERE id = ?`, "dep-running").Scan(&deps); err != nil {
			t.Fatal(err)
		}
		if envs != 1 || deps != 1 {
			t.Fatalf("after the refused delete: %d environments, %d deployments, want the environment and its deployment kept", envs, deps)
		}
	})
}

// besideEnvironment is the two tests' set-up: a service acting as acme's
// owner and acme's environment shop/dev, never deployed (a destroy of it
// runs nothing: the service's workspaces, configurations and runs are
// never called).
func besideEnvironment(t *testing.T, db *store.DB) (context.Context, *Service, int64) {
	t.Helper()
	ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, Owns: []string{"acme"}, Orgs: []string{"acme"}})
	s := NewService(db)
	s.Workspaces, s.Configs, s.Runs = noWorkspaces{}, struct{ Configs }{}, struct{ Runs }{}
	t.Cleanup(s.Shutdown)
	now := core.Micros(core.Now())
	storetest.Seed(t, db,
		[]any{`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-acme", "acme", "ops@acme.test", now, now},
		[]any{`INSERT INTO orchestrator_objects (organization_name, kind, scope, id, uuid, body, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			"acme", KindEnvironment, "shop", "dev", "u-1", `{"id":"dev","project_id":"shop","env_type_id":"dev"}`, now, now},
	)
	return ctx, s, now
}

// deploying is a deployment's transaction as Deploy's, for
// storetest.Beside: the environment claimed, deployment id inserted as
// executing (held open there).
func deploying(ctx context.Context, id string, now int64) func(tx *store.Tx) error {
	return func(tx *store.Tx) error {
		if err := claimEnv(ctx, tx, "acme", "shop", "dev"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO orchestrator_deployments (id, organization_name, project_id, env_id, mode, status, manifest, graph, providers, diff, created_by, graph_view, terraform, rollback_of, idempotency_key, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, '{}', '[]', '[]', '[]', '', '{}', '{}', '', '', ?, ?)`,
			id, "acme", "shop", "dev", ModeDeploy, StatusExecuting, now, now)
		return err
	}
}
