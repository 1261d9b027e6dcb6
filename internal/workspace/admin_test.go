package workspace_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// adminNames lists the names of an admin workspace page, as
// organization/name.
func adminNames(l *tfe.AdminWorkspaceList) []string {
	var out []string
	for _, w := range l.Items {
		org := ""
		if w.Organization != nil {
			org = w.Organization.Name
		}
		out = append(out, org+"/"+w.Name)
	}
	return out
}

// jsonAPIError decodes a JSON:API error document's first error.
func jsonAPIError(t *testing.T, body string) (status, detail string) {
	t.Helper()
	var doc struct {
		Errors []struct{ Status, Detail string } `json:"errors"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Errors) == 0 {
		t.Fatalf("not a JSON:API error document: %s", body)
	}
	return doc.Errors[0].Status, doc.Errors[0].Detail
}

// TestAdminWorkspaces: a site administrator lists every organization's
// workspaces (go-tfe's Admin.Workspaces), paged, searched by workspace or
// organization name (LIKE's wildcards taken literally), filtered by the
// current run's status and sorted by name or by the current run's
// creation, with organizations (and their owners) and current runs
// included; reads one and
// deletes one as the workspace's own DELETE does, runs and all, recorded
// in the site's audit trail. A bad sort is a 400 JSON:API error; everyone
// else, an organization's owner too, is told the routes do not exist.
func TestAdminWorkspaces(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "acme")
		newOrg(t, c, "beta")
		ws := map[string]*tfe.Workspace{}
		for _, n := range []string{"acme/app", "acme/db_main", "beta/app", "beta/dbxmain"} {
			org, name, _ := strings.Cut(n, "/")
			w, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			ws[n] = w
		}
		// A finished run on acme/app, then one on beta/app: their
		// workspaces' current runs, in that order.
		runOn := func(w *tfe.Workspace) *tfe.Run {
			cv := testenv.UploadConfig(ctx, t, c, w.ID, `output "o" { value = 1 }`)
			r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: w, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			return testenv.WaitRun(ctx, t, c, r.ID, tfe.RunPlannedAndFinished)
		}
		acmeRun, betaRun := runOn(ws["acme/app"]), runOn(ws["beta/app"])
		if _, err := c.Workspaces.Lock(ctx, ws["acme/db_main"].ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}

		list := func(o *tfe.AdminWorkspaceListOptions) *tfe.AdminWorkspaceList {
			t.Helper()
			l, err := c.Admin.Workspaces.List(ctx, o)
			if err != nil {
				t.Fatalf("listing %+v: %v", o, err)
			}
			return l
		}
		want := func(what string, l *tfe.AdminWorkspaceList, names ...string) {
			t.Helper()
			if got := adminNames(l); !slices.Equal(got, names) {
				t.Fatalf("%s: %v, want %v", what, got, names)
			}
		}
		byName := []string{"acme/app", "beta/app", "acme/db_main", "beta/dbxmain"}
		all := list(nil)
		want("every workspace", all, byName...)
		if all.TotalCount != 4 || all.CurrentPage != 1 {
			t.Fatalf("every workspace: %+v", all.Pagination)
		}
		if !all.Items[2].Locked || all.Items[0].Locked {
			t.Fatalf("locked: %v and %v, want acme/db_main's only", all.Items[0].Locked, all.Items[2].Locked)
		}
		if cr := all.Items[0].CurrentRun; cr == nil || cr.ID != acmeRun.ID || all.Items[2].CurrentRun != nil {
			t.Fatalf("current runs: %+v and %+v, want %s and none", all.Items[0].CurrentRun, all.Items[2].CurrentRun, acmeRun.ID)
		}
		page2 := list(&tfe.AdminWorkspaceListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 3}})
		want("page 2 of 3", page2, "beta/dbxmain")
		if page2.TotalCount != 4 || page2.TotalPages != 2 || page2.PreviousPage != 1 {
			t.Fatalf("page 2 of 3: %+v", page2.Pagination)
		}
		want("by -name", list(&tfe.AdminWorkspaceListOptions{Sort: "-name"}), "beta/dbxmain", "acme/db_main", "beta/app", "acme/app")
		want("q=APP", list(&tfe.AdminWorkspaceListOptions{Query: "APP"}), "acme/app", "beta/app")
		want("q=beta (the organization)", list(&tfe.AdminWorkspaceListOptions{Query: "beta"}), "beta/app", "beta/dbxmain")
		want("q=db_ (an underscore, not any character)", list(&tfe.AdminWorkspaceListOptions{Query: "db_"}), "acme/db_main")
		if l := list(&tfe.AdminWorkspaceListOptions{Query: "%"}); len(l.Items) != 0 || l.TotalCount != 0 {
			t.Fatalf("q=%%: %v", adminNames(l))
		}
		// Current runs: the oldest first, workspaces without one last
		// (by name); reversed, those without one first.
		want("by current-run.created-at", list(&tfe.AdminWorkspaceListOptions{Sort: "current-run.created-at"}),
			"acme/app", "beta/app", "acme/db_main", "beta/dbxmain")
		want("by -current-run.created-at", list(&tfe.AdminWorkspaceListOptions{Sort: "-current-run.created-at"}),
			"acme/db_main", "beta/dbxmain", "beta/app", "acme/app")
		filtered := list(&tfe.AdminWorkspaceListOptions{Filter: "applied, planned_and_finished",
			Include: []tfe.AdminWorkspaceIncludeOpt{tfe.AdminWorkspaceCurrentRun, tfe.AdminWorkspaceOrg}})
		want("filter planned_and_finished", filtered, "acme/app", "beta/app")
		if cr := filtered.Items[1].CurrentRun; cr == nil || cr.ID != betaRun.ID || cr.Status != tfe.RunPlannedAndFinished {
			t.Fatalf("beta/app's included current run: %+v", cr)
		}
		if o := filtered.Items[1].Organization; o == nil || o.Email != "ops@beta.test" {
			t.Fatalf("beta/app's included organization: %+v", o)
		}
		// organization.owners, as go-tfe sends it: the organizations
		// (the admin document) with their owners, the site admin who
		// made them, included.
		me, err := c.Users.ReadCurrent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		owned := list(&tfe.AdminWorkspaceListOptions{Query: "beta", Include: []tfe.AdminWorkspaceIncludeOpt{tfe.AdminWorkspaceOrgOwners}})
		want("q=beta with organization.owners", owned, "beta/app", "beta/dbxmain")
		for _, q := range []string{"?q=beta&include=organization.owners", "?q=beta&include=organization,organization.owners,current_run", "/" + ws["beta/app"].ID + "?include=organization.owners"} {
			code, body := raw(t, e, "GET", "/api/v2/admin/workspaces"+q, "")
			if owners := testenv.IncludedOwners(t, code, body); len(owners) != 1 || !slices.Equal(owners["beta"], []string{me.ID}) {
				t.Fatalf("%s: the included organizations' owners: %v, want beta's, %s", q, owners, me.ID)
			}
		}
		if l := list(&tfe.AdminWorkspaceListOptions{Filter: "applied"}); len(l.Items) != 0 || l.TotalCount != 0 {
			t.Fatalf("filter applied: %v", adminNames(l))
		}
		if l := list(&tfe.AdminWorkspaceListOptions{Filter: "no_such_status"}); len(l.Items) != 0 {
			t.Fatalf("filter no_such_status: %v", adminNames(l))
		}

		for _, q := range []string{"sort=created-at", "include=project", "page%5Bsize%5D=x"} {
			code, body := raw(t, e, "GET", "/api/v2/admin/workspaces?"+q, "")
			if status, detail := jsonAPIError(t, body); code != http.StatusBadRequest || status != "400" || detail == "" {
				t.Fatalf("?%s: %d %s, want a 400 JSON:API error that says why", q, code, body)
			}
		}

		read, err := c.Admin.Workspaces.Read(ctx, ws["beta/app"].ID)
		if err != nil || read.Name != "app" || read.Organization.Name != "beta" || read.CurrentRun.ID != betaRun.ID || read.Locked {
			t.Fatalf("reading beta/app: %+v, %v", read, err)
		}
		code, body := raw(t, e, "GET", "/api/v2/admin/workspaces/"+ws["beta/app"].ID+"?include=current_run,organization", "")
		if code != http.StatusOK || !strings.Contains(body, `"included"`) || !strings.Contains(body, `"ops@beta.test"`) || !strings.Contains(body, `"planned_and_finished"`) {
			t.Fatalf("reading beta/app with its organization and current run: %d %s", code, body)
		}
		if _, err := c.Admin.Workspaces.Read(ctx, "ws-nosuchworkspace"); err != tfe.ErrResourceNotFound {
			t.Fatalf("reading a workspace that does not exist: %v", err)
		}

		// Nobody else sees the routes, not even an owner of acme.
		teams, err := c.Teams.List(ctx, "acme", nil)
		if err != nil {
			t.Fatal(err)
		}
		var owners *tfe.Team
		for _, tm := range teams.Items {
			if tm.Name == "owners" {
				owners = tm
			}
		}
		owner, _ := e.UserClient(t, "acme", "owner@acme.test", owners)
		if _, err := owner.Workspaces.ReadByID(ctx, ws["acme/app"].ID); err != nil {
			t.Fatalf("acme's owner reading acme/app: %v", err)
		}
		for _, who := range []*tfe.Client{owner, newUserClient(t, e, "plain", false)} {
			if _, err := who.Admin.Workspaces.List(ctx, nil); err != tfe.ErrResourceNotFound {
				t.Fatalf("a non-admin listing: %v, want not found", err)
			}
			if _, err := who.Admin.Workspaces.Read(ctx, ws["acme/app"].ID); err != tfe.ErrResourceNotFound {
				t.Fatalf("a non-admin reading: %v, want not found", err)
			}
			if err := who.Admin.Workspaces.Delete(ctx, ws["acme/app"].ID); err != tfe.ErrResourceNotFound {
				t.Fatalf("a non-admin deleting: %v, want not found", err)
			}
		}
		if _, err := c.Workspaces.ReadByID(ctx, ws["acme/app"].ID); err != nil {
			t.Fatalf("acme/app after the refused deletions: %v", err)
		}

		// The deletion is the workspace's own: its runs go with it, and
		// the site's trail records it.
		if err := c.Admin.Workspaces.Delete(ctx, ws["beta/app"].ID); err != nil {
			t.Fatalf("deleting beta/app: %v", err)
		}
		if _, err := c.Workspaces.ReadByID(ctx, ws["beta/app"].ID); err != tfe.ErrResourceNotFound {
			t.Fatalf("beta/app after its deletion: %v", err)
		}
		if _, err := c.Runs.Read(ctx, betaRun.ID); err != tfe.ErrResourceNotFound {
			t.Fatalf("beta/app's run after its deletion: %v", err)
		}
		if err := c.Admin.Workspaces.Delete(ctx, ws["beta/app"].ID); err != tfe.ErrResourceNotFound {
			t.Fatalf("deleting beta/app again: %v", err)
		}
		after := list(nil)
		want("after the deletion", after, "acme/app", "acme/db_main", "beta/dbxmain")
		if after.TotalCount != 3 {
			t.Fatalf("after the deletion: %+v", after.Pagination)
		}
		deleted := false
		for _, ev := range e.AuditTrail(t) {
			if ev.Resource.Type == "workspace" && ev.Resource.ID == ws["beta/app"].ID && ev.Resource.Action == "delete" && ev.OrganizationName == "" {
				deleted = true
			}
		}
		if !deleted {
			t.Fatal("the admin deletion is not in the site's audit trail")
		}
	})
}
