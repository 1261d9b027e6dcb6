package notify

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestUpdateBesideOtherWork: an update of a notification configuration
// that overlaps another change of its row keeps what the other committed.
// Before (2026-11-30) the row was read before the update's transaction and
// written back whole: a delivery's response recorded meanwhile, or a
// change of the triggers, was lost, and a URL changed while an enable was
// verified was written back as the one verified (on both stores: the read
// did not wait for the other writer).
func TestUpdateBesideOtherWork(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"a delivery's response",
		"a change of the triggers",
		"a change of the URL while an enable is verified",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.ForEachDB(t, func(t *testing.T, db *store.DB) { updateBeside(t, db, name) })
		})
	}
}

type oneOrg struct{}

func (oneOrg) Organization(context.Context, string, string) (string, error) { return "acme", nil }

// Lock locks the organization's row, standing in for the workspace's (the
// server's Subscribables lock the workspace's, team's or project's).
func (oneOrg) Lock(ctx context.Context, q store.Q, _, _ string) error {
	var name string
	return q.QueryRow(ctx, `SELECT name FROM organizations WHERE name = ?`+store.ForUpdate(q), "acme").Scan(&name)
}

func updateBeside(t *testing.T, db *store.DB, name string) {
	ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, Owns: []string{"acme"}, Orgs: []string{"acme"}})
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(dest.Close)
	s, err := NewService(Options{DB: db, Subscribables: oneOrg{}, HTTP: dest.Client()})
	if err != nil {
		t.Fatal(err)
	}
	now := core.Micros(core.Now())
	storetest.Seed(t, db,
		[]any{`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-acme", "acme", "ops@acme.test", now, now},
		[]any{`INSERT INTO notification_configurations (id, organization_name, subscribable_type, subscribable_id, name, destination_type, url, enabled, triggers, email_addresses, email_user_ids, delivery_responses, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			"nc-1", "acme", OnWorkspace, "ws-1", "n", string(Generic), dest.URL + "/a", false, `["run:created"]`, `[]`, `[]`, `[]`, now, now},
	)
	// beside runs change in a transaction held open once it has
	// written, while act starts; it returns act's error.
	beside := func(t *testing.T, change string, args []any, act func() error) error {
		t.Helper()
		return storetest.Beside(t, db, storetest.Statements(append([]any{change}, args...)), act)
	}
	rename := func() error {
		newName := "renamed"
		_, err := s.Update(ctx, "nc-1", Changes{Name: &newName})
		return err
	}
	get := func(t *testing.T) *Configuration {
		t.Helper()
		c, err := s.Get(ctx, "nc-1")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	switch name {
	case "a delivery's response":
		// As record writes it, on the row locked.
		err := beside(t, `UPDATE notification_configurations SET delivery_responses = ?, last_failure = ? WHERE id = ?`,
			[]any{`[{"url":"` + dest.URL + `/a","body":"","code":"500","headers":{},"sent-at":"2026-11-30T00:00:00Z","successful":false}]`, "it failed", "nc-1"}, rename)
		if err != nil {
			t.Fatalf("renaming the configuration beside a delivery's response: %v", err)
		}
		if c := get(t); len(c.Responses) != 1 || c.Responses[0].Code != "500" || c.Name != "renamed" || c.LastFailure != "it failed" {
			t.Fatalf("after both the configuration is %q with responses %+v, last failure %q; want renamed, the 500 recorded beside, its failure", c.Name, c.Responses, c.LastFailure)
		}

	case "a change of the triggers":
		err := beside(t, `UPDATE notification_configurations SET triggers = ? WHERE id = ?`, []any{`["run:errored"]`, "nc-1"}, rename)
		if err != nil {
			t.Fatalf("renaming the configuration beside a change of its triggers: %v", err)
		}
		if c := get(t); len(c.Triggers) != 1 || c.Triggers[0] != "run:errored" || c.Name != "renamed" {
			t.Fatalf("after both the configuration is %q with triggers %v; want renamed, run:errored (changed beside)", c.Name, c.Triggers)
		}

	case "a change of the URL while an enable is verified":
		// The enable verifies /a; /b is committed meanwhile, never
		// verified: the enable is refused rather than turning /b on
		// (or writing /a back over it).
		err := beside(t, `UPDATE notification_configurations SET url = ? WHERE id = ?`, []any{dest.URL + "/b", "nc-1"}, func() error {
			on := true
			_, err := s.Update(ctx, "nc-1", Changes{Enabled: &on})
			return err
		})
		if core.KindOf(err) != core.KindConflict {
			t.Fatalf("enabling the configuration beside a change of its URL: %v, want a conflict", err)
		}
		if c := get(t); c.Enabled || c.URL != dest.URL+"/b" {
			t.Fatalf("after both the configuration is enabled %v with URL %s; want disabled, %s/b (changed beside)", c.Enabled, c.URL, dest.URL)
		}
	}
}
