package ui_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/audit"
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

func describe(ev *audit.Event) string {
	return fmt.Sprintf("%s %s %s by %s/%s in %q %v", ev.Resource.Action, ev.Resource.Type, ev.Resource.ID, ev.Actor.Kind, ev.Actor.ID, ev.OrganizationName, ev.Resource.Meta)
}

// uiEvents are the events done through the pages.
func uiEvents(events []*audit.Event) []*audit.Event {
	var out []*audit.Event
	for _, ev := range events {
		if ev.Resource.Meta["source"] == audit.SourceUI {
			out = append(out, ev)
		}
	}
	return out
}

// sameAsAPI checks that a page's event is recorded as the API request
// doing the same is: the same resource type, action, API route, actor and
// organization (the target is checked by the caller: it differs).
func sameAsAPI(t *testing.T, ui, api *audit.Event) {
	t.Helper()
	if api == nil {
		t.Errorf("no API event to compare %s with", describe(ui))
		return
	}
	if ui.Resource.Type != api.Resource.Type || ui.Resource.Action != api.Resource.Action ||
		ui.Resource.Meta["route"] != api.Resource.Meta["route"] || ui.Resource.Meta["parent-type"] != api.Resource.Meta["parent-type"] ||
		ui.Resource.Meta["status"] != api.Resource.Meta["status"] ||
		ui.Actor != api.Actor || ui.OrganizationID != api.OrganizationID {
		t.Errorf("a page's event differs from the API's:\n  page: %s\n  API:  %s", describe(ui), describe(api))
	}
	if api.Resource.Meta["source"] != "" {
		t.Errorf("an API event is marked as done through the UI: %s", describe(api))
	}
}

// Every form posted through the pages (create an organization and a
// workspace, lock, unlock, add a variable) lands in the audit trail as the
// same request through the API does, marked as done through the UI, and
// never with a variable's value.
func TestPageActionsAreAudited(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	tb := newTab(t, e, e.Token)

	tb.open("/app/organizations")
	tb.do(
		chromedp.SendKeys(chromedp.CSS(`#create-org input[name=name]`), "acme"),
		chromedp.SendKeys(chromedp.CSS(`#create-org input[name=email]`), "ops@acme.test"),
	)
	tb.press(`#create-org button`)
	tb.do(chromedp.WaitVisible(chromedp.CSS(`#cloud-block`)))
	tb.open("/app/acme/workspaces")
	tb.do(
		chromedp.Click(chromedp.CSS(`details summary`)),
		chromedp.SendKeys(chromedp.CSS(`#create-ws input[name=name]`), "web"),
	)
	tb.press(`#create-ws button`)
	tb.waitLocation("/app/acme/workspaces/web")
	tb.waitText("#lock-form button", "Lock", time.Minute)
	tb.press(`#lock-form button`)
	tb.waitText("#lock-form button", "Unlock", time.Minute)
	tb.press(`#lock-form button`)
	tb.waitText("#lock-form button", "Lock", time.Minute)
	tb.open("/app/acme/workspaces/web/variables")
	tb.do(
		chromedp.Click(chromedp.CSS(`details summary`)),
		chromedp.SendKeys(chromedp.CSS(`#add-var input[name=key]`), "db_password"),
		chromedp.SendKeys(chromedp.CSS(`#add-var input[name=value]`), "page-secret-value-77"),
		chromedp.Click(chromedp.CSS(`#add-var input[name=sensitive]`)),
	)
	tb.press(`#add-var button`)
	tb.waitText("#vars", "db_password", time.Minute)
	tb.screenshot("variables")
	web, err := e.Client.Workspaces.Read(ctx, "acme", "web")
	if err != nil {
		t.Fatalf("the workspace made through the page: %v", err)
	}
	vars, err := e.Client.Variables.List(ctx, web.ID, nil)
	if err != nil || len(vars.Items) != 1 {
		t.Fatalf("the variable made through the page: %v %v", vars, err)
	}

	// The same through the API, as the same caller.
	uiCount := len(uiEvents(e.AuditTrail(t)))
	testenv.NewOrg(t, e.Client, "other")
	api, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("api")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Workspaces.Lock(ctx, api.ID, tfe.WorkspaceLockOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Workspaces.Unlock(ctx, api.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Variables.Create(ctx, api.ID, tfe.VariableCreateOptions{Key: tfe.String("db_password"), Value: tfe.String("x"), Category: tfe.Category(tfe.CategoryTerraform)}); err != nil {
		t.Fatal(err)
	}

	events := e.AuditTrail(t)
	apiByKey := map[string]*audit.Event{}
	for _, ev := range events {
		if ev.Resource.Meta["source"] == "" {
			apiByKey[ev.Resource.Type+" "+ev.Resource.Action] = ev
		}
		if strings.Contains(describe(ev), "page-secret-value-77") {
			t.Errorf("an event holds the variable's value: %s", describe(ev))
		}
	}
	got := uiEvents(events)
	if len(got) != uiCount {
		t.Errorf("API requests were marked as done through the UI: %d page events, then %d", uiCount, len(got))
	}
	want := []struct{ typ, action, id string }{
		{"organization", "create", "acme"},
		{"workspace", "create", web.ID},
		{"workspace", "lock", web.ID},
		{"workspace", "unlock", web.ID},
		{"var", "create", vars.Items[0].ID},
	}
	if len(got) != len(want) {
		for _, ev := range got {
			t.Log(describe(ev))
		}
		t.Fatalf("%d events done through the pages, want %d", len(got), len(want))
	}
	for i, w := range want {
		ev := got[i]
		if ev.Resource.Type != w.typ || ev.Resource.Action != w.action || ev.Resource.ID != w.id {
			t.Errorf("page event %d: %s, want %s %s %s", i, describe(ev), w.action, w.typ, w.id)
		}
		if ev.Actor.Kind != auth.KindUser || ev.Actor.Name == "" || ev.Request.ID == "" || ev.Request.ClientIP == "" || ev.Resource.Meta["page"] == "" {
			t.Errorf("page event %d lacks who or from where: %s %+v", i, describe(ev), ev.Request)
		}
		sameAsAPI(t, ev, apiByKey[w.typ+" "+w.action])
	}
	if got[0].OrganizationID != "" || got[1].OrganizationName != "acme" || got[1].OrganizationID == "" {
		t.Errorf("creating an organization is a site event and the rest acme's: %s / %s", describe(got[0]), describe(got[1]))
	}
}

// wantPageEvent fails unless the trail holds an event done through the
// pages with the resource type, action, (when not "") ID and the status
// the API's route answers with.
func wantPageEvent(t *testing.T, e *testenv.Env, typ, action, id string, status int) {
	t.Helper()
	events := uiEvents(e.AuditTrail(t))
	for _, ev := range events {
		if ev.Resource.Type == typ && ev.Resource.Action == action && (id == "" || ev.Resource.ID == id) {
			if got := ev.Resource.Meta["status"]; got != strconv.Itoa(status) {
				t.Errorf("page event %s: status %s, want the API's %d", describe(ev), got, status)
			}
			return
		}
	}
	for _, ev := range events {
		t.Log(describe(ev))
	}
	t.Errorf("no page event %s %s %s in the audit trail", action, typ, id)
}
