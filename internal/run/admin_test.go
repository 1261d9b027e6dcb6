package run_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// ownerOf returns a client for a new member of org's owners team.
func ownerOf(t *testing.T, e *testenv.Env, org, email string) *tfe.Client {
	t.Helper()
	teams, err := e.Client.Teams.List(context.Background(), org, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range teams.Items {
		if tm.Name == "owners" {
			c, _ := e.UserClient(t, org, email, tm)
			return c
		}
	}
	t.Fatalf("organization %s has no owners team", org)
	return nil
}

// runIDs lists the IDs of an admin run page.
func runIDs(l *tfe.AdminRunsList) []string {
	var out []string
	for _, r := range l.Items {
		out = append(out, r.ID)
	}
	return out
}

// TestAdminRuns: a site administrator lists every organization's runs
// (go-tfe's Admin.Runs), newest first and paged, searched by run ID,
// workspace name or organization name (LIKE's wildcards taken
// literally), filtered by status and by when they were created, with
// their workspaces, those workspaces' organizations and those
// organizations' owners included. A date
// that is not RFC 3339 is a 400 JSON:API error that says so; a status no
// run has finds nothing. Everyone else, an organization's owner too, is
// told the routes do not exist.
func TestAdminRuns(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		testenv.NewOrg(t, c, "beta-ops")
		web, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("web-1")})
		if err != nil {
			t.Fatal(err)
		}
		db, err := c.Workspaces.Create(ctx, "beta-ops", tfe.WorkspaceCreateOptions{Name: tfe.String("db")})
		if err != nil {
			t.Fatal(err)
		}
		runOn := func(w *tfe.Workspace) *tfe.Run {
			cv := testenv.UploadConfig(ctx, t, c, w.ID, `output "o" { value = 1 }`)
			r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: w, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			return testenv.WaitRun(ctx, t, c, r.ID, tfe.RunPlannedAndFinished)
		}
		// The searches below name the workspace and the organization by
		// text with a "-" after a letter other than n: never part of a
		// run's ID ("run-" and letters and digits), which a search
		// matches too.
		r1, r2, r3 := runOn(web), runOn(db), runOn(web)
		if !r1.CreatedAt.Before(r2.CreatedAt) || !r2.CreatedAt.Before(r3.CreatedAt) {
			t.Fatalf("created at %v, %v, %v: want them in order", r1.CreatedAt, r2.CreatedAt, r3.CreatedAt)
		}

		list := func(o *tfe.AdminRunsListOptions) *tfe.AdminRunsList {
			t.Helper()
			l, err := c.Admin.Runs.List(ctx, o)
			if err != nil {
				t.Fatalf("listing %+v: %v", o, err)
			}
			return l
		}
		want := func(what string, l *tfe.AdminRunsList, runs ...*tfe.Run) {
			t.Helper()
			var ids []string
			for _, r := range runs {
				ids = append(ids, r.ID)
			}
			if got := runIDs(l); !slices.Equal(got, ids) {
				t.Fatalf("%s: %v, want %v", what, got, ids)
			}
		}
		all := list(nil)
		want("every run", all, r3, r2, r1)
		if all.TotalCount != 3 || all.Items[1].Status != tfe.RunPlannedAndFinished || !all.Items[1].CreatedAt.Equal(r2.CreatedAt) ||
			all.Items[1].StatusTimestamps == nil || all.Items[1].StatusTimestamps.PlannedAndFinishedAt.IsZero() || all.Items[1].Workspace.ID != db.ID {
			t.Fatalf("every run: %+v, %+v", all.Pagination, all.Items[1])
		}
		page := list(&tfe.AdminRunsListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 2}})
		want("page 2 of 2", page, r1)
		if page.TotalCount != 3 || page.TotalPages != 2 {
			t.Fatalf("page 2 of 2: %+v", page.Pagination)
		}
		want("q=the second run's ID", list(&tfe.AdminRunsListOptions{Query: r2.ID}), r2)
		want("q=B-1 (the workspace)", list(&tfe.AdminRunsListOptions{Query: "B-1"}), r3, r1)
		want("q=a-o (the organization)", list(&tfe.AdminRunsListOptions{Query: "a-o"}), r2)
		want("q=_ (an underscore, not any character)", list(&tfe.AdminRunsListOptions{Query: "_"}))
		want("filter pending,planned_and_finished", list(&tfe.AdminRunsListOptions{RunStatus: "pending,planned_and_finished"}), r3, r2, r1)
		want("filter applied", list(&tfe.AdminRunsListOptions{RunStatus: "applied"}))
		// go-tfe refuses a status it does not know before asking; the
		// server, as Terraform Enterprise, finds nothing.
		if code, body := e.API(t, "", "GET", "/api/v2/admin/runs?filter%5Bstatus%5D=no_such_status", nil); code != http.StatusOK || !strings.Contains(string(body), `"data":[]`) {
			t.Fatalf("filter no_such_status: %d %s, want an empty list", code, body)
		}

		at := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
		ms := time.Millisecond
		want("from r2", list(&tfe.AdminRunsListOptions{CreatedAfter: at(r2.CreatedAt.Add(-ms))}), r3, r2)
		want("to r2", list(&tfe.AdminRunsListOptions{CreatedBefore: at(r2.CreatedAt.Add(ms))}), r2, r1)
		want("from r2 to r2", list(&tfe.AdminRunsListOptions{CreatedAfter: at(r2.CreatedAt.Add(-ms)), CreatedBefore: at(r2.CreatedAt.Add(ms))}), r2)
		want("from r3 to r1", list(&tfe.AdminRunsListOptions{CreatedAfter: at(r3.CreatedAt.Add(-ms)), CreatedBefore: at(r1.CreatedAt.Add(ms))}))
		for _, q := range []string{"filter%5Bfrom%5D=yesterday", "filter%5Bto%5D=2026-01-02", "include=workspace.owners"} {
			code, body := e.API(t, "", "GET", "/api/v2/admin/runs?"+q, nil)
			var doc struct {
				Errors []struct{ Status, Detail string } `json:"errors"`
			}
			if code != http.StatusBadRequest || json.Unmarshal(body, &doc) != nil || len(doc.Errors) != 1 || doc.Errors[0].Status != "400" || doc.Errors[0].Detail == "" {
				t.Fatalf("?%s: %d %s, want a 400 JSON:API error that says why", q, code, body)
			}
		}
		if _, err := c.Admin.Runs.List(ctx, &tfe.AdminRunsListOptions{Include: []tfe.AdminRunIncludeOpt{"workpsace"}}); err != tfe.ErrInvalidIncludeValue {
			t.Fatalf("a misspelt include: %v", err)
		}

		with := list(&tfe.AdminRunsListOptions{Include: []tfe.AdminRunIncludeOpt{tfe.AdminRunWorkspaceOrg}})
		for _, r := range with.Items {
			w := r.Workspace
			if w == nil || w.Organization == nil || (w.ID == web.ID) != (w.Name == "web-1" && w.Organization.Name == "acme") ||
				(w.ID == db.ID) != (w.Name == "db" && w.Organization.Name == "beta-ops") {
				t.Fatalf("run %s's included workspace: %+v", r.ID, w)
			}
		}
		// workspace.organization.owners, as go-tfe sends it: the
		// workspaces, their organizations (the admin document) and the
		// owners, the site admin who made them.
		me, err := c.Users.ReadCurrent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		withOwners := list(&tfe.AdminRunsListOptions{Include: []tfe.AdminRunIncludeOpt{tfe.AdminRunWorkspaceOrgOwners}})
		want("with workspace.organization.owners", withOwners, r3, r2, r1)
		if w := withOwners.Items[1].Workspace; w == nil || w.ID != db.ID || w.Name != "db" {
			t.Fatalf("run %s's included workspace: %+v", r2.ID, w)
		}
		code, body := e.API(t, "", "GET", "/api/v2/admin/runs?include=workspace.organization.owners", nil)
		if owners := testenv.IncludedOwners(t, code, string(body)); len(owners) != 2 || !slices.Equal(owners["acme"], []string{me.ID}) || !slices.Equal(owners["beta-ops"], []string{me.ID}) {
			t.Fatalf("the included organizations' owners: %v, want acme's and beta's, %s", owners, me.ID)
		}
		var doc struct {
			Included []struct{ Type, ID string } `json:"included"`
		}
		if json.Unmarshal(body, &doc) != nil {
			t.Fatal(string(body))
		}
		var workspaces []string
		for _, inc := range doc.Included {
			if inc.Type == "workspaces" {
				workspaces = append(workspaces, inc.ID)
			}
		}
		if slices.Sort(workspaces); !slices.Equal(workspaces, slices.Sorted(slices.Values([]string{web.ID, db.ID}))) {
			t.Fatalf("include=workspace.organization.owners included the workspaces %v, want both", workspaces)
		}
		code, body = e.API(t, "", "GET", "/api/v2/admin/runs?include=workspace", nil)
		doc.Included = nil
		if code != http.StatusOK || json.Unmarshal(body, &doc) != nil || len(doc.Included) != 2 {
			t.Fatalf("include=workspace: %d %s, want each of the two workspaces once", code, body)
		}
		for _, inc := range doc.Included {
			if inc.Type != "workspaces" {
				t.Fatalf("include=workspace included a %s", inc.Type)
			}
		}

		owner := ownerOf(t, e, "acme", "owner@acme.test")
		if _, err := owner.Runs.Read(ctx, r1.ID); err != nil {
			t.Fatalf("acme's owner reading acme's run: %v", err)
		}
		if _, err := owner.Admin.Runs.List(ctx, nil); err != tfe.ErrResourceNotFound {
			t.Fatalf("acme's owner listing every run: %v, want not found", err)
		}
	})
}

// TestAdminForceCancelReleasesTheWorkspace: a site administrator's
// force-cancel (with a comment) ends a run that holds its workspace, as a
// user's force-cancel would but without the cancel a user needs first:
// the run is canceled, the comment is the run's, the workspace is
// released and the run waiting behind starts; force-canceled too, it
// leaves the workspace unlocked. The site's audit trail records it. An
// owner of the organization gets a 404 from the route, and a run that has
// ended cannot be force-canceled (409).
func TestAdminForceCancelReleasesTheWorkspace(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("web")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, c, w.ID, `output "o" { value = 1 }`)
		create := func() *tfe.Run {
			r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: w, ConfigurationVersion: cv})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		holder := testenv.WaitRun(ctx, t, c, create().ID, tfe.RunPlanned)
		waiting := create()
		if r, err := c.Runs.Read(ctx, waiting.ID); err != nil || r.Status != tfe.RunPending {
			t.Fatalf("the second run: %+v, %v; want pending behind the first", r, err)
		}
		if err := c.Runs.ForceCancel(ctx, holder.ID, tfe.RunForceCancelOptions{}); err == nil {
			t.Fatal("a force-cancel through the run's own route worked without a cancel first")
		}

		owner := ownerOf(t, e, "acme", "owner@acme.test")
		if err := owner.Admin.Runs.ForceCancel(ctx, holder.ID, tfe.AdminRunForceCancelOptions{}); err != tfe.ErrResourceNotFound {
			t.Fatalf("acme's owner force-canceling through the admin route: %v, want not found", err)
		}
		if err := c.Admin.Runs.ForceCancel(ctx, "run-nosuchrun", tfe.AdminRunForceCancelOptions{}); err != tfe.ErrResourceNotFound {
			t.Fatalf("force-canceling a run that does not exist: %v, want not found", err)
		}

		if err := c.Admin.Runs.ForceCancel(ctx, holder.ID, tfe.AdminRunForceCancelOptions{Comment: tfe.String("stuck since Tuesday")}); err != nil {
			t.Fatalf("the admin's force-cancel: %v", err)
		}
		r, err := c.Runs.Read(ctx, holder.ID)
		if err != nil || r.Status != tfe.RunCanceled {
			t.Fatalf("the force-canceled run: %+v, %v", r, err)
		}
		comments, err := c.Comments.List(ctx, holder.ID)
		if err != nil || len(comments.Items) != 1 || comments.Items[0].Body != "stuck since Tuesday" {
			t.Fatalf("the force-canceled run's comments: %+v, %v", comments, err)
		}
		// Released: the run behind takes the workspace and plans.
		testenv.WaitRun(ctx, t, c, waiting.ID, tfe.RunPlanned)
		if err := c.Admin.Runs.ForceCancel(ctx, waiting.ID, tfe.AdminRunForceCancelOptions{}); err != nil {
			t.Fatalf("the admin's force-cancel of the second run: %v", err)
		}
		after, err := c.Workspaces.ReadByID(ctx, w.ID)
		if err != nil || after.Locked || after.CurrentRun == nil || after.CurrentRun.ID != waiting.ID {
			t.Fatalf("the workspace after both force-cancels: %+v, %v; want it unlocked", after, err)
		}
		if r, err := c.Runs.Read(ctx, waiting.ID); err != nil || r.Status != tfe.RunCanceled {
			t.Fatalf("the second run: %+v, %v", r, err)
		}
		code, body := e.API(t, "", "POST", "/api/v2/admin/runs/"+url.PathEscape(holder.ID)+"/actions/force-cancel", `{"comment":"again"}`)
		if code != http.StatusConflict || !strings.Contains(string(body), "canceled") {
			t.Fatalf("force-canceling a canceled run: %d %s, want 409", code, body)
		}
		found := false
		for _, ev := range e.AuditTrail(t) {
			found = found || (ev.Resource.Type == "run" && ev.Resource.ID == holder.ID && ev.Resource.Action == "force-cancel" && ev.OrganizationName == "")
		}
		if !found {
			t.Fatal("the admin's force-cancel is not in the site's audit trail")
		}
	})
}
