package organization_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

func orgNames(l *tfe.AdminOrganizationList) []string {
	var out []string
	for _, o := range l.Items {
		out = append(out, o.Name)
	}
	return out
}

// errorDetails returns the details of a JSON:API error document.
func errorDetails(body []byte) []string {
	var doc struct {
		Errors []struct{ Status, Detail string }
	}
	_ = json.Unmarshal(body, &doc)
	var out []string
	for _, e := range doc.Errors {
		out = append(out, e.Detail)
	}
	return out
}

// TestAdminOrganizationsList: every organization, whoever its members,
// filtered by q (name or notification email), q[name] and q[email] and
// paged in the store, with its owners (included when asked); bad filters
// are 400s that say why, and to anyone but a site admin the routes do not
// exist.
func TestAdminOrganizationsList(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "acme")
		testenv.NewOrg(t, e.Client, "beta")
		// An organization the site admin is no member of.
		alice, am := e.UserClient(t, "acme", "alice@example.test")
		if _, err := alice.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("gamma"), Email: tfe.String("ops@acme-gamma.test")}); err != nil {
			t.Fatal(err)
		}

		all, err := e.Client.Admin.Organizations.List(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := orgNames(all); !slices.Equal(got, []string{"acme", "beta", "gamma"}) || all.TotalCount != 3 {
			t.Fatalf("every organization: %v (total %d)", got, all.TotalCount)
		}
		gamma := all.Items[2]
		if gamma.NotificationEmail != "ops@acme-gamma.test" || !strings.HasPrefix(gamma.ExternalID, "org-") || gamma.IsDisabled ||
			gamma.AccessBetaTools || gamma.TerraformWorkerSudoEnabled || gamma.WorkspaceLimit != nil ||
			gamma.GlobalModuleSharing == nil || *gamma.GlobalModuleSharing || gamma.ApplyTimeout != "" {
			t.Fatalf("gamma as listed: %+v", gamma)
		}
		if len(gamma.Owners) != 1 || gamma.Owners[0].ID != am.User.ID {
			t.Fatalf("gamma's owners: %+v, want alice", gamma.Owners)
		}

		for _, c := range []struct {
			query string
			want  []string
		}{
			{"q=ACME", []string{"acme", "gamma"}}, // gamma by its email
			{"q[name]=acme", []string{"acme"}},
			{"q[email]=acme", []string{"acme", "gamma"}},
			{"q[email]=acme&q[name]=g", []string{"gamma"}},
			{"q=_", nil},
			{"filter[module_producer]=true", nil},
			{"filter[provider_producer]=false", []string{"acme", "beta", "gamma"}},
			{"page[size]=2&page[number]=2", []string{"gamma"}},
		} {
			status, body := e.API(t, "", "GET", "/api/v2/admin/organizations?"+c.query, nil)
			var doc struct {
				Data []struct{ ID string }
				Meta struct {
					Pagination struct {
						TotalCount int `json:"total-count"`
					}
				}
			}
			if status != http.StatusOK || json.Unmarshal(body, &doc) != nil {
				t.Fatalf("?%s: %d %s", c.query, status, body)
			}
			var got []string
			for _, d := range doc.Data {
				got = append(got, d.ID)
			}
			total := len(c.want)
			if strings.HasPrefix(c.query, "page") {
				total = 3
			}
			if !slices.Equal(got, c.want) || doc.Meta.Pagination.TotalCount != total {
				t.Errorf("?%s: %v (total %d), want %v", c.query, got, doc.Meta.Pagination.TotalCount, c.want)
			}
		}

		withOwners, err := e.Client.Admin.Organizations.List(ctx, &tfe.AdminOrganizationListOptions{Query: "gamma", Include: []tfe.AdminOrgIncludeOpt{tfe.AdminOrgOwners}})
		if err != nil || len(withOwners.Items) != 1 || len(withOwners.Items[0].Owners) != 1 || withOwners.Items[0].Owners[0].Email != "alice@example.test" {
			t.Fatalf("include=owners: %+v, %v", withOwners, err)
		}

		for _, q := range []string{"filter[email]=x", "filter[module_producer]=maybe", "include=teams", "page[number]=0"} {
			status, body := e.API(t, "", "GET", "/api/v2/admin/organizations?"+q, nil)
			if status != http.StatusBadRequest || len(errorDetails(body)) == 0 || errorDetails(body)[0] == "" {
				t.Errorf("?%s: %d %s, want a 400 that says why", q, status, body)
			}
		}

		// To anyone else, even an owner, the routes do not exist.
		for _, r := range []struct{ method, path string }{
			{"GET", "/api/v2/admin/organizations"},
			{"GET", "/api/v2/admin/organizations/gamma"},
			{"PATCH", "/api/v2/admin/organizations/gamma"},
			{"DELETE", "/api/v2/admin/organizations/gamma"},
			{"GET", "/api/v2/admin/organizations/gamma/relationships/module-consumers"},
			{"PATCH", "/api/v2/admin/organizations/gamma/relationships/module-consumers"},
		} {
			req, err := alice.NewRequest(r.method, strings.TrimPrefix(r.path, "/api/v2/"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := req.Do(ctx, nil); !errors.Is(err, tfe.ErrResourceNotFound) {
				t.Errorf("%s %s by gamma's owner: %v, want 404", r.method, r.path, err)
			}
		}
	})
}

// TestAdminOrganizationsUpdate: the admin attributes change (is-disabled,
// sharing, the workspace limit, the time limits under both their names,
// beta tools, sudo); an update with a bad value is refused with a 422
// naming every attribute refused and why, changing nothing. Read, delete and module consumers answer as the rest
// of Terrace does.
func TestAdminOrganizationsUpdate(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "acme")
		testenv.NewOrg(t, e.Client, "beta")

		f := false
		org, err := e.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{
			AccessBetaTools: &f, GlobalModuleSharing: &f, GlobalProviderSharing: &f, IsDisabled: &f})
		if err != nil || org.Name != "acme" || org.IsDisabled {
			t.Fatalf("an update asking for what Terrace has: %+v, %v", org, err)
		}

		tr, h24, forever, limit := true, "24h", "forever", 2
		_, err = e.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{
			IsDisabled: &tr, AccessBetaTools: &tr, ApplyTimeout: &forever, PlanTimeout: &h24, TerraformBuildWorkerPlanTimeout: &forever,
			WorkspaceLimit: &limit, TerraformWorkerSudoEnabled: true})
		testenv.WantStatus(t, "an update with a bad time limit", err, "invalid attribute")
		for _, want := range []string{`apply-timeout must be a positive duration such as "2h", "30m" or "90s", not "forever"`, "terraform-build-worker-plan-timeout"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal does not say %s: %v", want, err)
			}
		}
		if org, err := e.Client.Admin.Organizations.Read(ctx, "acme"); err != nil || org.IsDisabled || org.WorkspaceLimit != nil ||
			org.AccessBetaTools || org.TerraformWorkerSudoEnabled || org.PlanTimeout != "" {
			t.Fatalf("a refused update changed the organization: %+v, %v", org, err)
		}

		// An organization's own time limits, beta tools and sudo (what
		// each does: internal/e2e TestOrganizationRunLimits): both names of
		// a limit set it; "" goes back to the site's.
		h1 := "1h"
		org, err = e.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{
			AccessBetaTools: &tr, PlanTimeout: &h24, TerraformBuildWorkerPlanTimeout: &h24, TerraformBuildWorkerApplyTimeout: &h1, TerraformWorkerSudoEnabled: true})
		if err != nil || !org.AccessBetaTools || !org.TerraformWorkerSudoEnabled || org.PlanTimeout != "24h" || org.TerraformBuildWorkerPlanTimeout != "24h" ||
			org.ApplyTimeout != "1h" || org.TerraformBuildWorkerApplyTimeout != "1h" {
			t.Fatalf("setting beta tools, sudo and time limits: %+v, %v", org, err)
		}
		if org, err := e.Client.Admin.Organizations.Read(ctx, "beta"); err != nil || org.AccessBetaTools || org.TerraformWorkerSudoEnabled || org.PlanTimeout != "" {
			t.Fatalf("another organization changed: %+v, %v", org, err)
		}
		status, body := e.API(t, "", "PATCH", "/api/v2/admin/organizations/acme",
			`{"data":{"type":"organizations","attributes":{"plan-timeout":"","terraform-build-worker-plan-timeout":"","apply-timeout":"2h","terraform-build-worker-apply-timeout":"3h"}}}`)
		if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), "disagrees") {
			t.Fatalf("two names of the apply limit disagreeing: %d %s", status, body)
		}
		f2 := false
		status, body = e.API(t, "", "PATCH", "/api/v2/admin/organizations/acme", `{"data":{"type":"organizations","attributes":{"plan-timeout":"","access-beta-tools":false}}}`)
		if status != http.StatusOK || !strings.Contains(string(body), `"plan-timeout":null`) || !strings.Contains(string(body), `"apply-timeout":"1h"`) ||
			!strings.Contains(string(body), `"access-beta-tools":false`) || !strings.Contains(string(body), `"terraform-worker-sudo-enabled":true`) {
			t.Fatalf("back to the site's plan limit: %d %s", status, body)
		}
		if org, err := e.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{ApplyTimeout: tfe.String(""), AccessBetaTools: &f2}); err != nil ||
			org.ApplyTimeout != "" || org.TerraformWorkerSudoEnabled != true {
			t.Fatalf("back to the site's apply limit: %+v, %v", org, err)
		}

		// workspace-limit: no workspace past it (the ones there stay when
		// it is lowered); null is none.
		if org, err := e.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{WorkspaceLimit: &limit}); err != nil ||
			org.WorkspaceLimit == nil || *org.WorkspaceLimit != 2 {
			t.Fatalf("a workspace limit of 2: %+v, %v", org, err)
		}
		for _, name := range []string{"one", "two"} {
			if _, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name)}); err != nil {
				t.Fatalf("workspace %s within the limit: %v", name, err)
			}
		}
		_, err = e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("three")})
		testenv.WantStatus(t, "a workspace past the limit", err, "workspace-limit")
		zero := 0
		if org, err := e.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{WorkspaceLimit: &zero}); err != nil ||
			org.WorkspaceLimit == nil || *org.WorkspaceLimit != 0 {
			t.Fatalf("a workspace limit of 0: %+v, %v", org, err)
		}
		if ws, err := e.Client.Workspaces.List(ctx, "acme", nil); err != nil || len(ws.Items) != 2 {
			t.Fatalf("lowering the limit changed the workspaces: %+v, %v", ws, err)
		}
		if status, body := e.API(t, "", "PATCH", "/api/v2/admin/organizations/acme", `{"data":{"type":"organizations","attributes":{"workspace-limit":-3}}}`); status != http.StatusUnprocessableEntity {
			t.Fatalf("a negative workspace limit: %d %s", status, body)
		}
		if status, body := e.API(t, "", "PATCH", "/api/v2/admin/organizations/acme", `{"data":{"type":"organizations","attributes":{"workspace-limit":null}}}`); status != http.StatusOK ||
			!strings.Contains(string(body), `"workspace-limit":null`) {
			t.Fatalf("no workspace limit: %d %s", status, body)
		}
		if _, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("three")}); err != nil {
			t.Fatalf("a workspace once the limit is gone: %v", err)
		}
		status, body = e.API(t, "", "PATCH", "/api/v2/admin/organizations/acme",
			`{"data":{"type":"organizations","attributes":{"is-disabled":"yes","notification-email":"x@acme.test","colour":"red"}}}`)
		if details := errorDetails(body); status != http.StatusUnprocessableEntity || len(details) != 3 {
			t.Fatalf("three bad attributes: %d %s", status, body)
		}

		if org, err := e.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{IsDisabled: &tr}); err != nil || !org.IsDisabled {
			t.Fatalf("disabling: %+v, %v", org, err)
		}
		if org, err := e.Client.Admin.Organizations.Read(ctx, "acme"); err != nil || !org.IsDisabled {
			t.Fatalf("reading a disabled organization: %+v, %v", org, err)
		}
		if _, err := e.Client.Admin.Organizations.Read(ctx, "nope"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("reading no organization: %v", err)
		}

		// Module consumers: none at first; set, listed, replaced; an
		// unknown organization or the organization itself is refused and
		// changes nothing; setting them turns global sharing off.
		consumers, err := e.Client.Admin.Organizations.ListModuleConsumers(ctx, "beta", nil)
		if err != nil || len(consumers.Items) != 0 {
			t.Fatalf("module consumers: %+v, %v", consumers, err)
		}
		if org, err := e.Client.Admin.Organizations.Update(ctx, "beta", tfe.AdminOrganizationUpdateOptions{GlobalModuleSharing: &tr, GlobalProviderSharing: &tr}); err != nil ||
			org.GlobalModuleSharing == nil || !*org.GlobalModuleSharing || org.GlobalProviderSharing == nil || !*org.GlobalProviderSharing {
			t.Fatalf("sharing beta's modules and providers globally: %+v, %v", org, err)
		}
		if err := e.Client.Admin.Organizations.UpdateModuleConsumers(ctx, "beta", []string{"acme"}); err != nil {
			t.Fatalf("setting a module consumer: %v", err)
		}
		consumers, err = e.Client.Admin.Organizations.ListModuleConsumers(ctx, "beta", nil)
		if err != nil || len(consumers.Items) != 1 || consumers.Items[0].Name != "acme" {
			t.Fatalf("module consumers after setting acme: %+v, %v", consumers, err)
		}
		if org, err := e.Client.Admin.Organizations.Read(ctx, "beta"); err != nil || org.GlobalModuleSharing == nil || *org.GlobalModuleSharing ||
			org.GlobalProviderSharing == nil || !*org.GlobalProviderSharing {
			t.Fatalf("naming consumers left global module sharing on, or turned provider sharing off: %+v, %v", org, err)
		}
		err = e.Client.Admin.Organizations.UpdateModuleConsumers(ctx, "beta", []string{"nope"})
		testenv.WantStatus(t, "an unknown consumer", err, "resource not found")
		err = e.Client.Admin.Organizations.UpdateModuleConsumers(ctx, "beta", []string{"beta"})
		testenv.WantStatus(t, "the organization itself as consumer", err, "its own modules")
		if consumers, err = e.Client.Admin.Organizations.ListModuleConsumers(ctx, "beta", nil); err != nil || len(consumers.Items) != 1 {
			t.Fatalf("a refused update changed the consumers: %+v, %v", consumers, err)
		}
		status, body = e.API(t, "", "GET", "/api/v2/admin/organizations?filter[module_producer]=true", nil)
		if status != http.StatusOK || !strings.Contains(string(body), `"id":"beta"`) || strings.Contains(string(body), `"id":"acme"`) {
			t.Errorf("module producers: %d %s, want beta alone", status, body)
		}
		if err := e.Client.Admin.Organizations.UpdateModuleConsumers(ctx, "beta", nil); err != nil {
			t.Fatalf("setting no module consumers: %v", err)
		}
		if consumers, err = e.Client.Admin.Organizations.ListModuleConsumers(ctx, "beta", nil); err != nil || len(consumers.Items) != 0 {
			t.Fatalf("module consumers after clearing them: %+v, %v", consumers, err)
		}

		if err := e.Client.Admin.Organizations.Delete(ctx, "acme"); err != nil {
			t.Fatalf("deleting a disabled organization: %v", err)
		}
		if _, err := e.Client.Organizations.Read(ctx, "acme"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("a deleted organization: %v", err)
		}
		if err := e.Client.Admin.Organizations.Delete(ctx, "acme"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("deleting it again: %v", err)
		}
	})
}

// TestDisabledOrganizationRefusesItsMembers: once a site admin disables
// an organization, its members' user tokens act as no member's there and
// are told why (403), it leaves their organization list, and its team and
// organization tokens are refused; the site admin still reaches it, and
// enabling it gives everything back.
func TestDisabledOrganizationRefusesItsMembers(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "acme")
		testenv.NewOrg(t, e.Client, "beta")
		devs, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("devs"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ManageWorkspaces: tfe.Bool(true)}})
		if err != nil {
			t.Fatal(err)
		}
		alice, _ := e.UserClient(t, "acme", "alice@example.test", devs)
		e.UserClient(t, "beta", "alice@example.test")
		ws, err := alice.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		teamTok, err := e.Client.TeamTokens.Create(ctx, devs.ID)
		if err != nil {
			t.Fatal(err)
		}
		orgTok, err := e.Client.OrganizationTokens.Create(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		team, org := e.NewClient(t, teamTok.Token), e.NewClient(t, orgTok.Token)

		setDisabled := func(v bool) {
			t.Helper()
			if _, err := e.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{IsDisabled: &v}); err != nil {
				t.Fatal(err)
			}
		}
		setDisabled(true)
		for what, err := range map[string]error{
			"reading the organization": func() error { _, err := alice.Organizations.Read(ctx, "acme"); return err }(),
			"reading a workspace":      func() error { _, err := alice.Workspaces.ReadByID(ctx, ws.ID); return err }(),
			"creating a workspace": func() error {
				_, err := alice.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("late")})
				return err
			}(),
		} {
			if err == nil || !strings.Contains(err.Error(), "disabled") {
				t.Errorf("a member of a disabled organization %s: %v, want a refusal that says it is disabled", what, err)
			}
		}
		status, body := e.API(t, userToken(t, e, "alice@example.test"), "GET", "/api/v2/organizations/acme", nil)
		if status != http.StatusForbidden || !strings.Contains(strings.Join(errorDetails(body), " "), "disabled") {
			t.Fatalf("a member reading a disabled organization: %d %s, want a 403 that says why", status, body)
		}
		l, err := alice.Organizations.List(ctx, nil)
		if err != nil || len(l.Items) != 1 || l.Items[0].Name != "beta" {
			t.Fatalf("a member's organizations with acme disabled: %+v, %v", l, err)
		}
		for name, c := range map[string]*tfe.Client{"team": team, "organization": org} {
			if _, err := c.Workspaces.ReadByID(ctx, ws.ID); err == nil || !strings.Contains(err.Error(), "disabled") {
				t.Errorf("the %s token of a disabled organization: %v, want refused", name, err)
			}
		}
		if _, err := e.Client.Workspaces.ReadByID(ctx, ws.ID); err != nil {
			t.Fatalf("the site admin in a disabled organization: %v", err)
		}

		setDisabled(false)
		if _, err := alice.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("again")}); err != nil {
			t.Fatalf("a member once the organization is enabled again: %v", err)
		}
		for name, c := range map[string]*tfe.Client{"team": team, "organization": org} {
			if _, err := c.Workspaces.ReadByID(ctx, ws.ID); err != nil {
				t.Errorf("the %s token once the organization is enabled again: %v", name, err)
			}
		}
		// Sessions and work done later on a caller's behalf build the
		// principal without the one query: the same rule.
		u, err := e.Server.Auth.UserByEmail(ctx, "alice@example.test")
		if err != nil {
			t.Fatal(err)
		}
		setDisabled(true)
		p, err := e.Server.Auth.UserPrincipal(ctx, u.ID)
		if err != nil || slices.Contains(p.Orgs, "acme") || !slices.Equal(p.Disabled, []string{"acme"}) || !slices.Equal(p.Orgs, []string{"beta"}) {
			t.Fatalf("a session's principal with acme disabled: %+v, %v", p, err)
		}
		if err := auth.CheckOrganization(auth.WithPrincipal(ctx, p), "acme"); core.KindOf(err) != core.KindForbidden {
			t.Fatalf("a session's access to a disabled organization: %v", err)
		}
	})
}

// aliceToken makes a new user token for the user with email.
func userToken(t *testing.T, e *testenv.Env, email string) string {
	t.Helper()
	ctx := context.Background()
	u, err := e.Server.Auth.UserByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: u.ID})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}
