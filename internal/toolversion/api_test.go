package toolversion_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var (
	sha1 = strings.Repeat("a1", 32)
	sha2 = strings.Repeat("b2", 32)
	sha3 = strings.Repeat("c3", 32)
)

const zipURL = "https://releases.example.test/terraform.zip"

// errorDetail returns the detail of a JSON:API error document's first
// error ("" when the body is no such document).
func errorDetail(body []byte) string {
	var doc struct {
		Errors []struct{ Status, Detail string }
	}
	if json.Unmarshal(body, &doc) != nil || len(doc.Errors) == 0 {
		return ""
	}
	return doc.Errors[0].Detail
}

func versions(l *tfe.AdminTerraformVersionsList) []string {
	var out []string
	for _, v := range l.Items {
		out = append(out, v.Version)
	}
	return out
}

func body(attrs map[string]any) map[string]any {
	return map[string]any{"data": map[string]any{"type": "terraform-versions", "attributes": attrs}}
}

// TestAdminTerraformVersions: a site admin registers, lists (filtered by
// version, searched, paged in the store), reads, changes and deletes
// terraform versions, as go-tfe sends them; url and sha are the
// linux/amd64 build's; bad input is a 422 (or 400) that says why; every
// change is a site event in the audit trail; and to anyone else the
// routes do not exist.
func TestAdminTerraformVersions(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client.Admin.TerraformVersions

		// url and sha alone: the linux/amd64 build, and the defaults.
		plain, err := c.Create(ctx, tfe.AdminTerraformVersionCreateOptions{Version: tfe.String("1.0.21"), URL: tfe.String(zipURL), Sha: tfe.String(sha1)})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(plain.ID, "tool-") || plain.Version != "1.0.21" || plain.URL != zipURL || plain.Sha != sha1 ||
			!plain.Enabled || plain.Official || plain.Beta || plain.Deprecated || plain.DeprecatedReason != nil || plain.Usage != 0 ||
			plain.CreatedAt.IsZero() || len(plain.Archs) != 1 || *plain.Archs[0] != (tfe.ToolVersionArchitecture{URL: zipURL, Sha: sha1, OS: "linux", Arch: "amd64"}) {
			t.Fatalf("created from url and sha: %+v (archs %+v)", plain, plain.Archs)
		}

		// archs: the url and sha are the linux/amd64 build's.
		arm := zipURL + "?arm64"
		multi, err := c.Create(ctx, tfe.AdminTerraformVersionCreateOptions{Version: tfe.String("1.0.22"), Deprecated: tfe.Bool(true),
			DeprecatedReason: tfe.String("use 1.0.21"), Official: tfe.Bool(true), Enabled: tfe.Bool(false), Beta: tfe.Bool(true),
			Archs: []*tfe.ToolVersionArchitecture{{URL: arm, Sha: sha2, OS: "linux", Arch: "arm64"}, {URL: zipURL, Sha: sha1, OS: "linux", Arch: "amd64"}}})
		if err != nil {
			t.Fatal(err)
		}
		if multi.URL != zipURL || multi.Sha != sha1 || len(multi.Archs) != 2 || multi.Archs[0].Arch != "arm64" || multi.Archs[0].URL != arm ||
			!multi.Deprecated || multi.DeprecatedReason == nil || *multi.DeprecatedReason != "use 1.0.21" || !multi.Official || multi.Enabled || !multi.Beta {
			t.Fatalf("created from archs: %+v", multi)
		}
		// url and sha beside archs without a linux/amd64 build add it.
		third, err := c.Create(ctx, tfe.AdminTerraformVersionCreateOptions{Version: tfe.String("2.3.0-beta1"), URL: tfe.String(zipURL), Sha: tfe.String(sha3),
			Archs: []*tfe.ToolVersionArchitecture{{URL: arm, Sha: sha2, OS: "linux", Arch: "arm64"}}})
		if err != nil {
			t.Fatal(err)
		}
		if third.Sha != sha3 || len(third.Archs) != 2 || third.Archs[1].Arch != "amd64" {
			t.Fatalf("url and sha beside other archs: %+v", third)
		}

		// Read.
		got, err := c.Read(ctx, multi.ID)
		if err != nil || got.ID != multi.ID || got.Version != "1.0.22" || len(got.Archs) != 2 || !got.CreatedAt.Equal(multi.CreatedAt) {
			t.Fatalf("read: %+v %v", got, err)
		}
		for _, id := range []string{"tool-nope", "not-a-version"} {
			if _, err := c.Read(ctx, id); !errors.Is(err, tfe.ErrResourceNotFound) {
				t.Fatalf("reading %s: %v, want 404", id, err)
			}
		}

		// List: newest first; filtered, searched and paged in the store.
		all, err := c.List(ctx, nil)
		if err != nil || !slices.Equal(versions(all), []string{"2.3.0-beta1", "1.0.22", "1.0.21"}) || all.TotalCount != 3 {
			t.Fatalf("list: %v (%+v) %v", versions(all), all.Pagination, err)
		}
		for _, c2 := range []struct {
			opts tfe.AdminTerraformVersionsListOptions
			want []string
		}{
			{tfe.AdminTerraformVersionsListOptions{Filter: "1.0.21"}, []string{"1.0.21"}},
			{tfe.AdminTerraformVersionsListOptions{Filter: "1.0"}, nil},
			{tfe.AdminTerraformVersionsListOptions{Filter: "1000.1000.42"}, nil},
			{tfe.AdminTerraformVersionsListOptions{Search: "1.0"}, []string{"1.0.22", "1.0.21"}},
			{tfe.AdminTerraformVersionsListOptions{Search: "beta"}, []string{"2.3.0-beta1"}},
			{tfe.AdminTerraformVersionsListOptions{Search: "%"}, nil},
			{tfe.AdminTerraformVersionsListOptions{Search: "_"}, nil},
		} {
			l, err := c.List(ctx, &c2.opts)
			if err != nil || !slices.Equal(versions(l), c2.want) || l.TotalCount != len(c2.want) {
				t.Errorf("%+v: %v (total %d) %v, want %v", c2.opts, versions(l), l.TotalCount, err, c2.want)
			}
		}
		p2, err := c.List(ctx, &tfe.AdminTerraformVersionsListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 2}})
		if err != nil || !slices.Equal(versions(p2), []string{"1.0.21"}) || p2.TotalCount != 3 || p2.TotalPages != 2 || p2.CurrentPage != 2 {
			t.Fatalf("page 2 of 2: %v (%+v) %v", versions(p2), p2.Pagination, err)
		}
		p999, err := c.List(ctx, &tfe.AdminTerraformVersionsListOptions{ListOptions: tfe.ListOptions{PageNumber: 999, PageSize: 100}})
		if err != nil || len(p999.Items) != 0 || p999.CurrentPage != 999 {
			t.Fatalf("page 999: %+v %v", p999, err)
		}
		for _, q := range []string{"filter[name]=x", "search[url]=x", "page[size]=x"} {
			if status, b := e.API(t, "", "GET", "/api/v2/admin/terraform-versions?"+q, nil); status != http.StatusBadRequest || errorDetail(b) == "" {
				t.Errorf("?%s: %d %s, want a 400 that says why", q, status, b)
			}
		}

		// Update: url and sha make the linux/amd64 build the only one;
		// archs without it leave no url and sha; deprecated off drops
		// the reason.
		up, err := c.Update(ctx, multi.ID, tfe.AdminTerraformVersionUpdateOptions{Version: tfe.String("1.0.23"), URL: tfe.String(zipURL + "?new"), Sha: tfe.String(sha3), Deprecated: tfe.Bool(false)})
		if err != nil || up.Version != "1.0.23" || up.URL != zipURL+"?new" || up.Sha != sha3 || len(up.Archs) != 1 || up.Deprecated || up.DeprecatedReason != nil ||
			!up.Official || up.Enabled || !up.Beta {
			t.Fatalf("update with url and sha: %+v %v", up, err)
		}
		up, err = c.Update(ctx, multi.ID, tfe.AdminTerraformVersionUpdateOptions{Archs: []*tfe.ToolVersionArchitecture{{URL: arm, Sha: sha2, OS: "linux", Arch: "arm64"}}})
		if err != nil || up.URL != "" || up.Sha != "" || len(up.Archs) != 1 || up.Archs[0].Arch != "arm64" || up.Version != "1.0.23" {
			t.Fatalf("update with archs: %+v %v", up, err)
		}
		// sha alone keeps the linux/amd64 build's url.
		up, err = c.Update(ctx, plain.ID, tfe.AdminTerraformVersionUpdateOptions{Sha: tfe.String(sha2), Enabled: tfe.Bool(false)})
		if err != nil || up.URL != zipURL || up.Sha != sha2 || up.Enabled {
			t.Fatalf("update of the sha alone: %+v %v", up, err)
		}
		if _, err := c.Update(ctx, "tool-nope", tfe.AdminTerraformVersionUpdateOptions{Beta: tfe.Bool(true)}); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("updating what does not exist: %v", err)
		}

		// Bad input: a 422 that says why (400 for what is not JSON).
		for _, bad := range []struct {
			method, path string
			attrs        map[string]any
			want         string
		}{
			{"POST", "", map[string]any{"url": zipURL, "sha": sha1}, "version is required"},
			{"POST", "", map[string]any{"version": "v1.2.3", "url": zipURL, "sha": sha1}, "no leading v"},
			{"POST", "", map[string]any{"version": "1.2", "url": zipURL, "sha": sha1}, "is not a version"},
			{"POST", "", map[string]any{"version": "1.2.3/../x", "url": zipURL, "sha": sha1}, "is not a version"},
			{"POST", "", map[string]any{"version": "1.2.3"}, "needs a build to download"},
			{"POST", "", map[string]any{"version": "1.2.3", "url": zipURL}, "url and sha go together"},
			{"POST", "", map[string]any{"version": "1.2.3", "url": "ftp://x/y.zip", "sha": sha1}, "not an http or https URL"},
			{"POST", "", map[string]any{"version": "1.2.3", "url": zipURL, "sha": "abc"}, "SHA-256 of the zip in hex"},
			{"POST", "", map[string]any{"version": "1.2.3", "archs": []map[string]string{{"url": zipURL, "sha": sha1, "os": "Linux", "arch": "amd64"}}}, "os and arch"},
			{"POST", "", map[string]any{"version": "1.2.3", "archs": []map[string]string{{"url": zipURL, "sha": sha1, "os": "linux", "arch": "amd64"}, {"url": arm, "sha": sha2, "os": "linux", "arch": "amd64"}}}, "linux/amd64 twice"},
			{"POST", "", map[string]any{"version": "1.2.3", "url": arm, "sha": sha1, "archs": []map[string]string{{"url": zipURL, "sha": sha1, "os": "linux", "arch": "amd64"}}}, "differ from the linux/amd64 entry"},
			{"POST", "", map[string]any{"version": "1.2.3", "url": zipURL, "sha": sha1, "deprecated-reason": "why"}, "set deprecated to true"},
			{"POST", "", map[string]any{"version": "1.2.3", "url": zipURL, "sha": sha1, "enabled": "yes"}, `"enabled" must be of type bool`},
			{"POST", "", map[string]any{"version": "1.0.21", "url": zipURL, "sha": sha1}, "registered already"},
			{"PATCH", "/" + plain.ID, map[string]any{"version": "2.3.0-beta1"}, "registered already"},
			{"PATCH", "/" + plain.ID, map[string]any{"archs": []any{}}, "needs a build to download"},
		} {
			status, b := e.API(t, "", bad.method, "/api/v2/admin/terraform-versions"+bad.path, body(bad.attrs))
			if status != http.StatusUnprocessableEntity || !strings.Contains(errorDetail(b), bad.want) {
				t.Errorf("%s %v: %d %s, want a 422 saying %q", bad.method, bad.attrs, status, b, bad.want)
			}
		}
		if status, b := e.API(t, "", "POST", "/api/v2/admin/terraform-versions", "not json"); status != http.StatusBadRequest {
			t.Errorf("a body that is no JSON object: %d %s", status, b)
		}
		if l, _ := c.List(ctx, nil); l == nil || l.TotalCount != 3 {
			t.Fatalf("a refused request changed the list: %+v", l)
		}

		// To anyone else every route is a 404, as an unknown route is.
		testenv.NewOrg(t, e.Client, "acme")
		_, m := e.UserClient(t, "acme", "alice@example.test")
		_, token, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/api/v2/admin/terraform-versions", nil},
			{"POST", "/api/v2/admin/terraform-versions", body(map[string]any{"version": "9.9.9", "url": zipURL, "sha": sha1})},
			{"GET", "/api/v2/admin/terraform-versions/" + plain.ID, nil},
			{"PATCH", "/api/v2/admin/terraform-versions/" + plain.ID, body(map[string]any{"enabled": true})},
			{"DELETE", "/api/v2/admin/terraform-versions/" + plain.ID, nil},
		} {
			if status, b := e.API(t, token, r.method, r.path, r.body); status != http.StatusNotFound || errorDetail(b) == "" {
				t.Errorf("%s %s by a user: %d %s, want a JSON:API 404", r.method, r.path, status, b)
			}
		}

		// Delete.
		if err := c.Delete(ctx, third.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(ctx, third.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("reading a deleted version: %v", err)
		}
		if err := c.Delete(ctx, third.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("deleting a deleted version: %v", err)
		}

		// Every change is a site event.
		var events []string
		for _, ev := range e.AuditTrail(t) {
			if strings.HasPrefix(ev.Resource.Type, "terraform-version") && ev.OrganizationID == "" {
				events = append(events, ev.Resource.Action+" "+ev.Resource.ID)
			}
		}
		for _, want := range []string{"create " + plain.ID, "update " + multi.ID, "delete " + third.ID} {
			if !slices.Contains(events, want) {
				t.Errorf("the audit trail has %v, not %q", events, want)
			}
		}
	})
}

// TestTerraformVersionUsage: usage counts the site's workspaces on a
// version (also one written "v1.0.30"); a version in use is neither
// deleted nor renamed (422); a workspace may not be set to a registered
// version that is disabled, while the workspaces already on it keep it;
// versions not registered stay free to choose; a version a run that has
// not ended was pinned to is neither deleted nor renamed either.
func TestTerraformVersionUsage(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client.Admin.TerraformVersions
		testenv.NewOrg(t, e.Client, "acme")
		testenv.NewOrg(t, e.Client, "beta")
		v, err := c.Create(ctx, tfe.AdminTerraformVersionCreateOptions{Version: tfe.String("1.0.30"), URL: tfe.String(zipURL), Sha: tfe.String(sha1)})
		if err != nil {
			t.Fatal(err)
		}
		a, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("a"), TerraformVersion: tfe.String("1.0.30")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.Workspaces.Create(ctx, "beta", tfe.WorkspaceCreateOptions{Name: tfe.String("b"), TerraformVersion: tfe.String("v1.0.30")}); err != nil {
			t.Fatal(err)
		}
		other, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("other"), TerraformVersion: tfe.String("1.5.7")})
		if err != nil {
			t.Fatal(err)
		}
		usage := func() int {
			t.Helper()
			got, err := c.Read(ctx, v.ID)
			if err != nil {
				t.Fatal(err)
			}
			l, err := c.List(ctx, &tfe.AdminTerraformVersionsListOptions{Filter: "1.0.30"})
			if err != nil || len(l.Items) != 1 || l.Items[0].Usage != got.Usage {
				t.Fatalf("the list's usage: %+v %v, read's %d", l, err, got.Usage)
			}
			return got.Usage
		}
		if n := usage(); n != 2 {
			t.Fatalf("usage %d, want 2 (workspaces a and b)", n)
		}

		// In use: neither deleted nor renamed.
		err = c.Delete(ctx, v.ID)
		testenv.WantStatus(t, "deleting a version in use", err, "invalid attribute")
		status, b := e.API(t, "", "DELETE", "/api/v2/admin/terraform-versions/"+v.ID, nil)
		if status != http.StatusUnprocessableEntity || !strings.Contains(errorDetail(b), "2 workspaces use it") {
			t.Fatalf("deleting a version in use: %d %s", status, b)
		}
		status, b = e.API(t, "", "PATCH", "/api/v2/admin/terraform-versions/"+v.ID, body(map[string]any{"version": "1.0.31"}))
		if status != http.StatusUnprocessableEntity || !strings.Contains(errorDetail(b), "cannot be renamed") {
			t.Fatalf("renaming a version in use: %d %s", status, b)
		}

		// Disabled: no workspace may choose it, those on it keep it.
		if _, err := c.Update(ctx, v.ID, tfe.AdminTerraformVersionUpdateOptions{Enabled: tfe.Bool(false)}); err != nil {
			t.Fatal(err)
		}
		status, b = e.API(t, "", "PATCH", "/api/v2/workspaces/"+other.ID, map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"terraform-version": "1.0.30"}}})
		if status != http.StatusUnprocessableEntity || !strings.Contains(errorDetail(b), "terraform 1.0.30 is disabled") {
			t.Fatalf("setting a workspace to a disabled version: %d %s", status, b)
		}
		_, err = e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("new"), TerraformVersion: tfe.String("v1.0.30")})
		testenv.WantStatus(t, "creating a workspace on a disabled version", err, "invalid attribute")
		if _, err := e.Client.Workspaces.Read(ctx, "acme", "new"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("the refused workspace exists: %v", err)
		}
		kept, err := e.Client.Workspaces.UpdateByID(ctx, a.ID, tfe.WorkspaceUpdateOptions{Description: tfe.String("still on 1.0.30"), TerraformVersion: tfe.String("1.0.30")})
		if err != nil || kept.TerraformVersion != "1.0.30" || kept.Description != "still on 1.0.30" {
			t.Fatalf("a workspace on the disabled version, updated with its settings as they are: %+v %v", kept, err)
		}
		if w, err := e.Client.Workspaces.ReadByID(ctx, other.ID); err != nil || w.TerraformVersion != "1.5.7" {
			t.Fatalf("the refused update changed the workspace: %+v %v", w, err)
		}

		// Enabled again: chosen freely; a workspace moved off it no
		// longer counts.
		if _, err := c.Update(ctx, v.ID, tfe.AdminTerraformVersionUpdateOptions{Enabled: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.Workspaces.UpdateByID(ctx, other.ID, tfe.WorkspaceUpdateOptions{TerraformVersion: tfe.String("1.0.30")}); err != nil {
			t.Fatalf("setting a workspace to an enabled version: %v", err)
		}
		if n := usage(); n != 3 {
			t.Fatalf("usage %d, want 3", n)
		}
		for _, ws := range []string{a.ID, other.ID} {
			if _, err := e.Client.Workspaces.UpdateByID(ctx, ws, tfe.WorkspaceUpdateOptions{TerraformVersion: tfe.String("latest")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.Client.Workspaces.Delete(ctx, "beta", "b"); err != nil {
			t.Fatal(err)
		}
		if n := usage(); n != 0 {
			t.Fatalf("usage %d after every workspace left it, want 0", n)
		}
		// A run that planned with it and has not ended (a saved plan
		// waiting to be applied) keeps it: its apply may install it.
		now := core.Micros(core.Now())
		if _, err := e.Server.DB.Exec(ctx, `INSERT INTO runs (id, workspace_id, organization_name, configuration_version_id, status, plan_only, plan_id, apply_id, created_at, updated_at, doc)
			VALUES ('run-pinned', ?, 'acme', 'cv-none', 'planned_and_saved', ?, 'plan-pinned', 'apply-pinned', ?, ?, ?)`,
			a.ID, false, now, now, `{"id":"run-pinned","status":"planned_and_saved","terraform_version":"1.0.30"}`); err != nil {
			t.Fatal(err)
		}
		status, b = e.API(t, "", "DELETE", "/api/v2/admin/terraform-versions/"+v.ID, nil)
		if status != http.StatusUnprocessableEntity || !strings.Contains(errorDetail(b), "1 run that has not ended uses it") {
			t.Fatalf("deleting a version a pending run uses: %d %s", status, b)
		}
		status, b = e.API(t, "", "PATCH", "/api/v2/admin/terraform-versions/"+v.ID, body(map[string]any{"version": "1.0.31"}))
		if status != http.StatusUnprocessableEntity || !strings.Contains(errorDetail(b), "cannot be renamed") {
			t.Fatalf("renaming a version a pending run uses: %d %s", status, b)
		}
		if _, err := e.Server.DB.Exec(ctx, `UPDATE runs SET status = 'discarded' WHERE id = 'run-pinned'`); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, v.ID); err != nil {
			t.Fatalf("deleting a version no longer in use: %v", err)
		}
		if _, err := e.Server.DB.Exec(ctx, `DELETE FROM runs WHERE id = 'run-pinned'`); err != nil {
			t.Fatal(err)
		}
	})
}

// TestBetaVersionsNeedBetaTools: a version registered as beta is chosen
// only by the workspaces of an organization a site admin gave beta tools
// (access-beta-tools); without it creating or updating a workspace onto
// it is refused (422, saying why) and changes nothing, while a workspace
// already on it keeps it through an update that leaves the version as it
// is (its runs error, saying why). Both stores.
func TestBetaVersionsNeedBetaTools(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "acme")
		if _, err := e.Client.Admin.TerraformVersions.Create(ctx, tfe.AdminTerraformVersionCreateOptions{Version: tfe.String("1.0.40"), URL: tfe.String(zipURL),
			Sha: tfe.String(sha1), Beta: tfe.Bool(true), Enabled: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		beta := func(on bool) {
			t.Helper()
			if _, err := e.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{AccessBetaTools: &on}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("early"), TerraformVersion: tfe.String("1.0.40")})
		testenv.WantStatus(t, "a workspace on a beta version without beta tools", err, "invalid attribute")
		if !strings.Contains(err.Error(), "no access to beta tools") {
			t.Errorf("the refusal does not say why: %v", err)
		}
		if _, err := e.Client.Workspaces.Read(ctx, "acme", "early"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("the refused workspace exists: %v", err)
		}
		plain, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("plain"), TerraformVersion: tfe.String("1.5.7")})
		if err != nil {
			t.Fatal(err)
		}
		status, b := e.API(t, "", "PATCH", "/api/v2/workspaces/"+plain.ID, map[string]any{"data": map[string]any{"type": "workspaces", "attributes": map[string]any{"terraform-version": "1.0.40"}}})
		if status != http.StatusUnprocessableEntity || !strings.Contains(errorDetail(b), "terraform 1.0.40 is a beta version") {
			t.Fatalf("updating a workspace onto a beta version without beta tools: %d %s", status, b)
		}

		beta(true)
		early, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("early"), TerraformVersion: tfe.String("1.0.40")})
		if err != nil || early.TerraformVersion != "1.0.40" {
			t.Fatalf("a workspace on a beta version with beta tools: %+v %v", early, err)
		}

		beta(false)
		kept, err := e.Client.Workspaces.UpdateByID(ctx, early.ID, tfe.WorkspaceUpdateOptions{Description: tfe.String("still beta"), TerraformVersion: tfe.String("1.0.40")})
		if err != nil || kept.TerraformVersion != "1.0.40" {
			t.Fatalf("a workspace already on the beta version, its version unchanged: %+v %v", kept, err)
		}
		_, err = e.Client.Workspaces.UpdateByID(ctx, plain.ID, tfe.WorkspaceUpdateOptions{TerraformVersion: tfe.String("1.0.40")})
		testenv.WantStatus(t, "updating onto a beta version once beta tools are gone", err, "invalid attribute")
		// A run of the workspace left on it errors, saying why.
		cv := testenv.UploadConfig(ctx, t, e.Client, early.ID, `resource "terraform_data" "x" {}`)
		r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: early, ConfigurationVersion: cv})
		if err != nil {
			t.Fatal(err)
		}
		testenv.WaitRunWithin(ctx, t, e.Client, r.ID, time.Minute, tfe.RunErrored)
		lr, err := e.Client.Plans.Logs(ctx, r.Plan.ID)
		if err != nil {
			t.Fatal(err)
		}
		if log, err := io.ReadAll(lr); err != nil || !strings.Contains(string(log), "terraform 1.0.40 is a beta version, and this organization has no access to beta tools") {
			t.Errorf("the run on a beta version without beta tools: its plan log does not say why: %s %v", log, err)
		}
		if w, err := e.Client.Workspaces.ReadByID(ctx, plain.ID); err != nil || w.TerraformVersion != "1.5.7" {
			t.Fatalf("the refused update changed the workspace: %+v %v", w, err)
		}
	})
}
