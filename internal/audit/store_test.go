package audit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

type orgNames map[string]string

func (o orgNames) IDByName(_ context.Context, name string) (string, error) {
	if id, ok := o[name]; ok {
		return id, nil
	}
	return "", core.NotFound("organization %q not found", name)
}

func newTestService(t *testing.T, db *store.DB, retention time.Duration) *Service {
	t.Helper()
	ctx := context.Background()
	for _, n := range []string{"acme", "other"} {
		if _, err := db.Exec(ctx, `INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-"+n, n, "x@example.com", 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewService(Options{DB: db, Organizations: orgNames{"acme": "org-acme", "other": "org-other"},
		Locate: func(context.Context, string, string) (string, error) { return "", nil }, Retention: retention})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func event(org string, at time.Time, action string) *Event {
	return &Event{Timestamp: at, OrganizationID: "org-" + org, OrganizationName: org,
		Actor:    Actor{Kind: auth.KindUser, ID: "user-1", Name: "alice", TokenID: "at-1"},
		Resource: Resource{Type: "workspace", ID: "ws-1", Action: action, Meta: map[string]string{"route": "x"}},
		Request:  Request{ID: newUUID(), ClientIP: "127.0.0.1", UserAgent: "test"}}
}

func asOrgToken(org string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindOrganization, Organization: org, TokenID: "at-org"})
}

func TestStoreListFiltersAndPages(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		s := newTestService(t, db, 0)
		base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		for i := range 5 {
			if ok, err := s.Record(context.Background(), event("acme", base.Add(time.Duration(i)*time.Second), fmt.Sprint("a", i))); err != nil || !ok {
				t.Fatalf("record: %v %v", ok, err)
			}
		}
		if _, err := s.Record(context.Background(), event("other", base, "elsewhere")); err != nil {
			t.Fatal(err)
		}
		ctx := asOrgToken("acme")
		got, total, err := s.List(ctx, Filter{Page: 2, Size: 2})
		if err != nil || total != 5 || len(got) != 2 || got[0].Resource.Action != "a2" || got[1].Resource.Action != "a3" {
			t.Fatalf("page 2 = %v (total %d) %v", got, total, err)
		}
		if got[0].Actor.Name != "alice" || got[0].Request.ClientIP != "127.0.0.1" || got[0].Resource.Meta["route"] != "x" {
			t.Fatalf("event did not round-trip: %+v", got[0])
		}
		after, _ := parseSince("2026-01-02T03:04:06Z") // whole second: events from :07 on
		got, total, err = s.List(ctx, Filter{Page: 1, Size: 10, After: after})
		if err != nil || total != 3 || got[0].Resource.Action != "a2" {
			t.Fatalf("since = %v (total %d) %v", got, total, err)
		}
		all, total, err := s.ListAll(auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, SiteAdmin: true}), Filter{Page: 1, Size: 10})
		if err != nil || total != 6 || len(all) != 6 {
			t.Fatalf("site trail: %d %d %v", len(all), total, err)
		}
		// The site trail is the model's SiteAdmin: hidden from an owner,
		// and from no token asked to give one.
		owner := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, UserID: "user-1", Orgs: []string{"acme"}, Owns: []string{"acme"}})
		if _, _, err := s.ListAll(owner, Filter{Page: 1, Size: 10}); core.KindOf(err) != core.KindNotFound {
			t.Fatalf("an owner read the site trail: %v", err)
		}
		if _, _, err := s.ListAll(context.Background(), Filter{Page: 1, Size: 10}); core.KindOf(err) != core.KindUnauthorized {
			t.Fatalf("no token read the site trail: %v", err)
		}
		for _, p := range []*auth.Principal{{Kind: auth.KindUser, UserID: "user-1", Orgs: []string{"acme"}, Owns: []string{"acme"}}, {Kind: auth.KindTeam, Organization: "acme", OwnersTeam: true}} {
			if _, _, err := s.List(auth.WithPrincipal(context.Background(), p), Filter{Page: 1, Size: 10}); core.KindOf(err) != core.KindForbidden {
				t.Fatalf("%s token read the trail: %v", p.Kind, err)
			}
		}
	})
}

func TestEventsAreAppendOnly(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		s := newTestService(t, db, 0)
		e := event("acme", core.Now(), "create")
		if _, err := s.Record(context.Background(), e); err != nil {
			t.Fatal(err)
		}
		_, err := db.Exec(context.Background(), `UPDATE audit_events SET actor_name = ? WHERE id = ?`, "mallory", e.ID)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Fatalf("an update of an audit event gave %v, want the append-only refusal", err)
		}
	})
}

func TestDisabledTrailRecordsNothing(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		s := newTestService(t, db, 0)
		owner := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, UserID: "user-1", Orgs: []string{"acme"}, Owns: []string{"acme"}})
		c, err := s.SetTrailsEnabled(owner, "acme", false)
		if err != nil || c.TrailsEnabled || c.TrailsDisabledAt == nil {
			t.Fatalf("disable: %+v %v", c, err)
		}
		if ok, err := s.Record(context.Background(), event("acme", core.Now(), "update")); err != nil || ok {
			t.Fatalf("recorded with the trail off: %v %v", ok, err)
		}
		// The recorder names the organization only (the store finds its
		// ID as it records): the trail's switch holds for it too.
		byName := func(org string) *Event {
			e := event(org, core.Now(), "update")
			e.OrganizationID = ""
			return e
		}
		if ok, err := s.Record(context.Background(), byName("acme")); err != nil || ok {
			t.Fatalf("an event naming its organization only was recorded with the trail off: %v %v", ok, err)
		}
		other := byName("other")
		if ok, err := s.Record(context.Background(), other); err != nil || !ok {
			t.Fatalf("another organization's event naming it only: %v %v", ok, err)
		}
		var orgID string
		if err := db.QueryRow(context.Background(), `SELECT organization_id FROM audit_events WHERE id = ?`, other.ID).Scan(&orgID); err != nil || orgID != "org-other" {
			t.Fatalf("an event naming its organization only was recorded with organization ID %q, %v; want org-other", orgID, err)
		}
		site := byName("")
		if ok, err := s.Record(context.Background(), site); err != nil || !ok {
			t.Fatalf("a site event: %v %v", ok, err)
		}
		if ok, _ := s.Record(context.Background(), event("other", core.Now(), "update")); !ok {
			t.Fatal("another organization's event was dropped")
		}
		member := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, UserID: "user-2", Orgs: []string{"acme"}})
		if _, err := s.SetTrailsEnabled(member, "acme", true); core.KindOf(err) != core.KindForbidden {
			t.Fatalf("a member turned the trail on: %v", err)
		}
		if _, err := s.SetTrailsEnabled(owner, "acme", true); err != nil {
			t.Fatal(err)
		}
		if ok, _ := s.Record(context.Background(), event("acme", core.Now(), "update")); !ok {
			t.Fatal("nothing recorded after the trail was turned back on")
		}
	})
}

func TestPruneLoopDeletesOldEventsAndStops(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		s := newTestService(t, db, time.Hour)
		now := core.Now()
		for _, at := range []time.Time{now.Add(-3 * time.Hour), now.Add(-2 * time.Hour), now.Add(-time.Minute)} {
			if _, err := s.Record(context.Background(), event("acme", at, "x")); err != nil {
				t.Fatal(err)
			}
		}
		pruned := make(chan int64)
		s.pruned = pruned
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() { defer close(stopped); s.Run(ctx) }()
		if n := <-pruned; n != 2 {
			t.Fatalf("first pass pruned %d events, want 2", n)
		}
		cancel()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatal("the pruning loop did not stop with its context")
		}
		_, total, err := s.List(asOrgToken("acme"), Filter{Page: 1, Size: 10})
		if err != nil || total != 1 {
			t.Fatalf("after pruning %d events remain (%v), want 1", total, err)
		}
	})
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"2020-05-30T17:52:46Z":      "2020-05-30T17:52:47Z",
		"2020-05-30T17:52:46.000Z":  "2020-05-30T17:52:46.001Z",
		"2020-05-30T19:52:46 02:00": "2020-05-30T17:52:47Z",
	} {
		got, err := parseSince(in)
		if err != nil || got.Format(time.RFC3339Nano) != want {
			t.Errorf("parseSince(%q) = %v, %v; want %s", in, got.Format(time.RFC3339Nano), err, want)
		}
	}
	if _, err := parseSince("yesterday"); core.KindOf(err) != core.KindBadRequest {
		t.Errorf("a bad since gave %v", err)
	}
}
