package authz

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestGrantUpdatesBesideOtherWork: an update of a team's custom grant on a
// workspace or a project that overlaps another update of the same grant
// keeps what the other committed. Before (2026-11-30) the grant was read
// outside the writing transaction and written back whole: a permission
// taken away beside it came back (on both stores: the read did not wait
// for the other writer).
func TestGrantUpdatesBesideOtherWork(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"workspace", "project"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.ForEachDB(t, func(t *testing.T, db *store.DB) { grantsBeside(t, db, name) })
		})
	}
}

func grantsBeside(t *testing.T, db *store.DB, name string) {
	ctx := context.Background()
	now := core.Micros(core.Now())
	s := &Service{db: db}
	storetest.Seed(t, db,
		[]any{`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-acme", "acme", "ops@acme.test", now, now},
		[]any{`INSERT INTO teams (id, organization_name, name, created_at) VALUES (?, ?, ?, ?)`, "team-dev", "acme", "dev", now},
		[]any{`INSERT INTO projects (id, organization_name, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "prj-x", "acme", "x", now, now},
		[]any{`INSERT INTO workspaces (id, organization_name, project_id, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`, "ws-x", "acme", "prj-x", "x", now, now},
	)
	// beside runs change in a transaction held open once it has
	// written, while act starts; it returns act's error.
	beside := func(t *testing.T, change func(tx *store.Tx) error, act func() error) error {
		t.Helper()
		return storetest.Beside(t, db, change, act)
	}
	read, write := "read", "write"
	// grant gives team-dev a custom grant on target.
	grant := func(t *testing.T, table, col, target string, g any) *struct{ ID string } {
		t.Helper()
		id := core.NewID("grant")
		perms, _ := json.Marshal(g)
		if _, err := db.Exec(ctx, `INSERT INTO `+table+` (id, team_id, `+col+`, access, perms, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			id, "team-dev", target, "custom", string(perms), now); err != nil {
			t.Fatal(err)
		}
		return &struct{ ID string }{id}
	}

	switch name {
	case "workspace":
		g := grant(t, "team_workspaces", "workspace_id", "ws-x", WorkspaceGrant{Runs: "apply", Variables: write, StateVersions: read, SentinelMocks: "none"})
		// The other update takes the variables' write away.
		err := beside(t, func(tx *store.Tx) error {
			cur, err := teamWorkspaceIn(ctx, tx, g.ID, store.ForUpdate(tx))
			if err != nil {
				return err
			}
			cur.Grant.Variables = read
			perms, _ := json.Marshal(cur.Grant)
			_, err = tx.Exec(ctx, `UPDATE team_workspaces SET perms = ? WHERE id = ?`, string(perms), g.ID)
			return err
		}, func() error {
			_, err := s.UpdateTeamWorkspace(ctx, g.ID, nil, WorkspaceGrantOptions{StateVersions: &write})
			return err
		})
		if err != nil {
			t.Fatalf("updating the grant's state versions beside the change of its variables: %v", err)
		}
		got, err := s.TeamWorkspace(ctx, g.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Grant.Variables != read || got.Grant.StateVersions != write {
			t.Fatalf("after both updates the grant is %+v, want variables read (taken away beside) and state versions write", got.Grant)
		}

	case "project":
		pg := projectCustomDefault
		pg.Workspace.Variables = write
		g := grant(t, "team_projects", "project_id", "prj-x", pg)
		err := beside(t, func(tx *store.Tx) error {
			cur, err := teamProjectIn(ctx, tx, g.ID, store.ForUpdate(tx))
			if err != nil {
				return err
			}
			cur.Grant.Workspace.Variables = read
			perms, _ := json.Marshal(cur.Grant)
			_, err = tx.Exec(ctx, `UPDATE team_projects SET perms = ? WHERE id = ?`, string(perms), g.ID)
			return err
		}, func() error {
			var o ProjectGrantOptions
			if err := json.Unmarshal([]byte(`{"workspace-access": {"state-versions": "read"}}`), &o); err != nil {
				return err
			}
			_, err := s.UpdateTeamProject(ctx, g.ID, nil, o)
			return err
		})
		if err != nil {
			t.Fatalf("updating the project grant's state versions beside the change of its variables: %v", err)
		}
		got, err := s.TeamProject(ctx, g.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Grant.Workspace.Variables != read || got.Grant.Workspace.StateVersions != read {
			t.Fatalf("after both updates the project grant is %+v, want variables read (taken away beside) and state versions read", got.Grant.Workspace)
		}
	}
}
