package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/audit"
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// The audit trail page lists the newest events first: page 1 holds the
// latest 50, its Older link leads to the earlier ones, whose Newer link
// leads back. The API's order (oldest first) stays as it was.
func TestAuditTrailPageNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	// 60 events after whatever making the organization recorded, a
	// minute apart: ev-00 the oldest of them, ev-59 the newest.
	start := time.Now().Add(time.Hour)
	for i := range 60 {
		ev := &audit.Event{Timestamp: start.Add(time.Duration(i) * time.Minute), OrganizationName: "acme",
			Actor:    audit.Actor{Kind: auth.KindUser, ID: "user-test", Name: "tester"},
			Resource: audit.Resource{Type: "workspace", ID: fmt.Sprintf("ev-%02d", i), Action: "update"}}
		if ok, err := e.Server.Audit.Record(ctx, ev); err != nil || !ok {
			t.Fatalf("recording event %d: %v %v", i, ok, err)
		}
	}
	resources := func(tb *tab) []string {
		t.Helper()
		return must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#audit-events tbody td:nth-child(4)')).map(function(td){return td.textContent.trim()})`))
	}
	tb := newTab(t, e, e.Token)
	tb.open("/app/acme/audit")
	first := resources(tb)
	if len(first) != 50 || first[0] != "workspace ev-59" || first[49] != "workspace ev-10" {
		t.Fatalf("page 1 of the trail: %d events, from %q to %q; want the 50 newest, ev-59 first", len(first), first[0], first[len(first)-1])
	}
	if tb.exists(`#audit-pages a[rel=prev]`) {
		t.Fatal("the newest page links to newer events")
	}
	if got := tb.text(`#audit-pages a[rel=next]`); !strings.Contains(got, "Older") {
		t.Fatalf("the newest page's link onwards reads %q, want Older", got)
	}
	tb.press(`#audit-pages a[rel=next]`)
	tb.waitLocation("page=2")
	second := resources(tb)
	if len(second) == 0 || second[0] != "workspace ev-09" || !strings.HasPrefix(tb.text("#audit-pages"), "← Newer") {
		t.Fatalf("Older led to %v (pages: %q), want ev-09 and earlier, with a Newer link", second, tb.text("#audit-pages"))
	}
	if tb.exists(`#audit-pages a[rel=next]`) {
		t.Fatal("the oldest page links to older events")
	}
	tb.press(`#audit-pages a[rel=prev]`)
	tb.waitJS(`!location.href.includes("page=2")`, "went back to page 1")
	if got := resources(tb); len(got) == 0 || got[0] != "workspace ev-59" {
		t.Fatalf("Newer led to %v, want the newest page", got)
	}

	// The API's list (the same store) still reads oldest first.
	api := e.AuditTrail(t)
	var ours []string
	for _, ev := range api {
		if strings.HasPrefix(ev.Resource.ID, "ev-") {
			ours = append(ours, ev.Resource.ID)
		}
	}
	if len(ours) != 60 || ours[0] != "ev-00" || ours[59] != "ev-59" {
		t.Fatalf("the API's trail lists the events as %v, want oldest first", ours)
	}
}

// The trail names the workspaces, runs, projects and teams its events
// are about, with a link to their pages and the ID in the title; a
// workspace deleted since shows its ID and says so; an event of an ID
// the page does not look up shows the ID as recorded.
func TestAuditTrailNamesItsResources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	ws := setupApp(t, e)
	rn, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, PlanOnly: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	prj, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	team, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("devs")})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("gone")})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Workspaces.DeleteByID(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	st, body := getPage(t, e, e.Token, "/app/acme/audit")
	if st != http.StatusOK {
		t.Fatalf("the audit trail: %d", st)
	}
	cell := func(id string) string {
		t.Helper()
		c := between(body, `<td data-id="`+id+`">`, `</td>`)
		if c == "" {
			t.Errorf("no event names %s:\n%s", id, between(body, `<table id="audit-events">`, `</table>`))
		}
		return c
	}
	for id, want := range map[string]string{
		ws.ID:   `workspace <a href="/app/acme/workspaces/app" title="` + ws.ID + `">app</a>`,
		rn.ID:   `run <a href="/app/acme/workspaces/app/runs/` + rn.ID + `" title="` + rn.ID + `">` + rn.ID + ` in app</a>`,
		prj.ID:  `project <a href="/app/acme/workspaces?project=` + prj.ID + `" title="` + prj.ID + `">platform</a>`,
		team.ID: `team <a href="/app/acme/teams" title="` + team.ID + `">devs</a>`,
	} {
		if got := cell(id); !strings.Contains(got, want) {
			t.Errorf("the event of %s reads %q, want %q", id, got, want)
		}
	}
	if got := cell(gone.ID); !strings.Contains(got, gone.ID+" <small>(deleted)</small>") || strings.Contains(got, "<a ") {
		t.Errorf("the deleted workspace's events read %q, want its ID, deleted, no link", got)
	}
}
