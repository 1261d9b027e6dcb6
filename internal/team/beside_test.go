package team

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestTeamsBesideOtherWork: a change to a team whose transaction overlaps
// another's that changes the same rows acts on what that other
// transaction committed. Each case failed on PostgreSQL before its fix
// (2026-11-30), where the reads were not locked: two owners removed at
// once each counted the other still there and the organization was left
// with none; an update of a team's visibility wrote back the organization
// access it had read, over an access change committed meanwhile. Both
// stores; SQLite's transactions never overlap.
func TestTeamsBesideOtherWork(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"owners team: two owners removed at once",
		"owners team: an owner's membership deleted beside another's removal",
		"an update beside a change of the organization access",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.ForEachDB(t, func(t *testing.T, db *store.DB) { teamsBeside(t, db, name) })
		})
	}
}

func teamsBeside(t *testing.T, db *store.DB, name string) {
	ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, UserID: "user-carol", Owns: []string{"acme"}, Orgs: []string{"acme"}})
	now := core.Micros(core.Now())
	s := NewService(db)
	if _, err := db.Exec(ctx, `INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-acme", "acme", "ops@acme.test", now, now); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"user-alice", "user-bob"} {
		if _, err := db.Exec(ctx, `INSERT INTO users (id, username, email, created_at) VALUES (?, ?, ?, ?)`, u, u, u+"@acme.test", now); err != nil {
			t.Fatal(err)
		}
	}
	// alice and bob are the two owners of acme.
	if err := db.Tx(ctx, func(tx *store.Tx) error {
		if err := s.CreateOwners(ctx, tx, "acme", "user-alice"); err != nil {
			return err
		}
		if err := ensureMembership(ctx, tx, "acme", "user-bob", StatusActive); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO team_members (team_id, user_id) SELECT id, ? FROM teams WHERE organization_name = ? AND name = ?`, "user-bob", "acme", OwnersTeam)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var ownersID string
	if err := db.QueryRow(ctx, `SELECT id FROM teams WHERE organization_name = ? AND name = ?`, "acme", OwnersTeam).Scan(&ownersID); err != nil {
		t.Fatal(err)
	}
	owners, err := s.load(ctx, db, ownersID, false)
	if err != nil {
		t.Fatal(err)
	}
	// beside runs change in a transaction held open once it has
	// written, while act starts; it returns act's error.
	beside := func(t *testing.T, change func(tx *store.Tx) error, act func() error) error {
		t.Helper()
		return storetest.Beside(t, db, change, act)
	}
	ownersLeft := func(t *testing.T) []string {
		t.Helper()
		left, err := s.load(ctx, db, ownersID, false)
		if err != nil {
			t.Fatal(err)
		}
		return left.UserIDs
	}
	removeAlice := func(tx *store.Tx) error { return removeMembersIn(ctx, tx, owners, []string{"user-alice"}) }

	switch name {
	case "owners team: two owners removed at once":
		err := beside(t, removeAlice, func() error { return s.removeMembers(ctx, owners, []string{"user-bob"}) })
		if !errors.Is(err, core.ErrConflict) {
			t.Fatalf("removing bob from the owners beside alice's removal: %v, want a conflict (the last owner)", err)
		}
		if got := ownersLeft(t); len(got) != 1 || got[0] != "user-bob" {
			t.Fatalf("the owners left are %v, want bob", got)
		}

	case "owners team: an owner's membership deleted beside another's removal":
		var bobMembership string
		if err := db.QueryRow(ctx, `SELECT id FROM organization_memberships WHERE organization_name = ? AND user_id = ?`, "acme", "user-bob").Scan(&bobMembership); err != nil {
			t.Fatal(err)
		}
		err := beside(t, removeAlice, func() error { return s.DeleteMembership(ctx, bobMembership) })
		if !errors.Is(err, core.ErrConflict) {
			t.Fatalf("deleting bob's membership beside alice's removal from the owners: %v, want a conflict (the last owner)", err)
		}
		if got := ownersLeft(t); len(got) != 1 || got[0] != "user-bob" {
			t.Fatalf("the owners left are %v, want bob", got)
		}

	case "an update beside a change of the organization access":
		dev, err := s.Create(ctx, "acme", Options{Name: ptr("dev"), OrganizationAccess: &AccessOptions{ManageWorkspaces: ptr(true), ManagePolicies: ptr(true)}})
		if err != nil {
			t.Fatal(err)
		}
		// Another update takes manage-policies away.
		err = beside(t, func(tx *store.Tx) error {
			cur, err := s.load(ctx, tx, dev.ID, true)
			if err != nil {
				return err
			}
			cur.Settings.Access.ManagePolicies = false
			attrs, _ := json.Marshal(cur.Settings)
			_, err = tx.Exec(ctx, `UPDATE teams SET attrs = ? WHERE id = ?`, string(attrs), dev.ID)
			return err
		}, func() error {
			_, err := s.Update(ctx, dev.ID, Options{Visibility: ptr("organization")})
			return err
		})
		if err != nil {
			t.Fatalf("updating the team's visibility beside the change of its access: %v", err)
		}
		got, err := s.load(ctx, db, dev.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if got.Settings.Access.ManagePolicies || !got.Settings.Access.ManageWorkspaces || got.Settings.Visibility != "organization" {
			t.Fatalf("after both updates the team is %+v, want manage-policies taken away, manage-workspaces kept, visibility organization", got.Settings)
		}
	}
}

func ptr[T any](v T) *T { return &v }
