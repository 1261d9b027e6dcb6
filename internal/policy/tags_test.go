package policy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// selectorText writes a set's selectors in their stored order: "+key=value"
// for an inclusion, "-key" for a key-only exclusion.
func selectorText(sels []*tfe.PolicySetTagSelectorAttr) string {
	var out []string
	for _, s := range sels {
		t := "+"
		if s.IsExclude {
			t = "-"
		}
		t += s.Key
		if s.Value != nil {
			t += "=" + *s.Value
		}
		out = append(out, t)
	}
	return strings.Join(out, " ")
}

func sel(key string, value *string, exclude bool) *tfe.PolicySetTagSelector {
	return &tfe.PolicySetTagSelector{Key: key, Value: value, IsExclude: exclude}
}

// TestTagSelectors: tag selectors through go-tfe and the raw API, on both
// stores: created with a set, added (an existing one is no change),
// removed (a missing one is no change), replaced by a PATCH, read back in
// reads and lists (a key-only selector's value null); bad input is a 422
// naming the problem; only a caller who manages policies changes them;
// deleting the set deletes them.
func TestTagSelectors(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		read := func(id string) string {
			t.Helper()
			ps, err := c.PolicySets.Read(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return selectorText(ps.TagSelectors)
		}
		check := func(step, id, want string) {
			t.Helper()
			if got := read(id); got != want {
				t.Errorf("%s: selectors %q, want %q", step, got, want)
			}
		}

		plain, err := c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("plain"), Kind: tfe.OPA})
		if err != nil {
			t.Fatal(err)
		}
		if len(plain.TagSelectors) != 0 {
			t.Errorf("a set without selectors has %#v, want none", plain.TagSelectors)
		}
		if code, body := e.API(t, "", "GET", "/api/v2/policy-sets/"+plain.ID, nil); code != 200 || !strings.Contains(string(body), `"tag-selectors":[]`) {
			t.Errorf("a set without selectors reads %d %s, want tag-selectors []", code, body)
		}

		ps, err := c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("scoped"), Kind: tfe.OPA,
			TagSelectors: []*tfe.PolicySetTagSelector{sel("env", tfe.String("prod"), false), sel("team", nil, false)}})
		if err != nil {
			t.Fatal(err)
		}
		if got := selectorText(ps.TagSelectors); got != "+env=prod +team" {
			t.Errorf("the create's answer has selectors %q", got)
		}
		check("created", ps.ID, "+env=prod +team")

		if err := c.PolicySets.AddTagSelectors(ctx, ps.ID, tfe.PolicySetAddTagSelectorsOptions{TagSelectors: []*tfe.PolicySetTagSelector{
			sel("env", tfe.String("prod"), false), sel("sandbox", nil, true), sel("tier", tfe.String(""), false), sel("env", tfe.String("prod"), true),
		}}); err != nil {
			t.Fatal(err)
		}
		check("added (one already there, an empty value)", ps.ID, "+env=prod +team +tier -env=prod -sandbox")

		if err := c.PolicySets.RemoveTagSelectors(ctx, ps.ID, tfe.PolicySetRemoveTagSelectorsOptions{TagSelectors: []*tfe.PolicySetTagSelector{
			sel("team", nil, false), sel("absent", tfe.String("x"), false), sel("sandbox", nil, false), sel("env", tfe.String("prod"), true),
		}}); err != nil {
			t.Fatal(err)
		}
		check("removed (one absent, one of the other kind)", ps.ID, "+env=prod +tier -sandbox")

		l, err := c.PolicySets.List(ctx, "acme", nil)
		if err != nil || len(l.Items) != 2 || selectorText(l.Items[0].TagSelectors) != "" || selectorText(l.Items[1].TagSelectors) != "+env=prod +tier -sandbox" {
			t.Errorf("the list's selectors: %+v (%v)", l, err)
		}

		// An update without selectors keeps them; one with them replaces
		// them (a selector given twice is kept once, and answered once).
		if _, err := c.PolicySets.Update(ctx, ps.ID, tfe.PolicySetUpdateOptions{Description: tfe.String("by tag")}); err != nil {
			t.Fatal(err)
		}
		check("an update without selectors", ps.ID, "+env=prod +tier -sandbox")
		code, body := e.API(t, "", "PATCH", "/api/v2/policy-sets/"+ps.ID, `{"data":{"type":"policy-sets","attributes":{"tag-selectors":[{"tag-key":"env","tag-value":"dev","is-exclude":true},{"tag-key":"env","tag-value":"dev","is-exclude":true}]}}}`)
		if code != 200 || !strings.Contains(string(body), `"tag-selectors":[{"tag-key":"env","tag-value":"dev","is-exclude":true}]`) {
			t.Errorf("PATCH tag-selectors: %d %s", code, body)
		}
		check("an update with selectors", ps.ID, "-env=dev")

		// Bad input: a 422 (a 400 for a body that is not JSON) with the
		// reason, and nothing changed.
		long := strings.Repeat("v", 257)
		many := make([]string, 101)
		for i := range many {
			many[i] = fmt.Sprintf(`{"tag-key":"k%d"}`, i)
		}
		for _, tc := range []struct{ body, status, detail string }{
			{`{"data":[{"tag-value":"x"}]}`, "422", "tag-key is required"},
			{`{"data":[{"tag-key":"ok"},{"tag-key":"bad!key"}]}`, "422", `tag selector 2: tag-key \"bad!key\" is invalid`},
			{`{"data":[{"tag-key":"` + strings.Repeat("k", 129) + `"}]}`, "422", "is invalid: a key is 1 to 128 characters"},
			{`{"data":[{"tag-key":"env","tag-value":"` + long + `"}]}`, "422", "a value is at most 256 characters"},
			{`{"data":[{"tag-key":"env","tag-value":"a\u0000b"}]}`, "422", "none of them a control character"},
			{`{"data":[]}`, "422", "at least one tag selector is required"},
			{`{"data":{"tag-key":"env"}}`, "422", "data must be of type array, not object"},
			{`{"data":[{"tag-key":5}]}`, "422", "data.tag-key must be of type string, not number"},
			{`{"data":[{"tag-key":"env","is-exclude":"yes"}]}`, "422", "data.is-exclude must be of type boolean, not string"},
			{`{}`, "422", `\"data\" is required`},
			{`[1]`, "422", `a JSON object with \"data\"`},
			{`{"data":[` + strings.Join(many, ",") + `]}`, "422", "at most 100 tag selectors; 101 were given"},
			{`{"data":[{`, "400", "not JSON"},
		} {
			code, body := e.API(t, "", "POST", "/api/v2/policy-sets/"+ps.ID+"/tag-selectors", tc.body)
			if fmt.Sprint(code) != tc.status || !strings.Contains(string(body), tc.detail) || !strings.Contains(string(body), `"errors"`) {
				t.Errorf("POST tag-selectors %.60s: %d %s, want %s with %q", tc.body, code, body, tc.status, tc.detail)
			}
		}
		if code, body := e.API(t, "", "DELETE", "/api/v2/policy-sets/"+ps.ID+"/tag-selectors", `{"data":[{"tag-key":""}]}`); code != 422 || !strings.Contains(string(body), "tag-key is required") {
			t.Errorf("DELETE with an empty key: %d %s", code, body)
		}
		_, err = c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("bad"), Kind: tfe.OPA,
			TagSelectors: []*tfe.PolicySetTagSelector{sel("", tfe.String("prod"), false)}})
		testenv.WantStatus(t, "a create with a selector without a key", err, "tag selector 1: tag-key is required")
		code, body = e.API(t, "", "POST", "/api/v2/organizations/acme/policy-sets", `{"data":{"type":"policy-sets","attributes":{"name":"bad","kind":"opa","tag-selectors":[{"tag-key":["env"]}]}}}`)
		if code != 422 || !strings.Contains(string(body), "tag-selectors.tag-key") {
			t.Errorf("a create with a key of the wrong type: %d %s", code, body)
		}
		if l, err := c.PolicySets.List(ctx, "acme", &tfe.PolicySetListOptions{Search: "bad"}); err != nil || len(l.Items) != 0 {
			t.Errorf("a refused create left a set: %+v (%v)", l, err)
		}
		check("after bad input", ps.ID, "-env=dev")

		// The limit counts what the set has: its one, 60, then 50 more, is 111.
		var sixty, fifty []*tfe.PolicySetTagSelector
		for i := range 60 {
			sixty = append(sixty, sel(fmt.Sprintf("a%d", i), nil, false))
		}
		for i := range 50 {
			fifty = append(fifty, sel(fmt.Sprintf("b%d", i), nil, true))
		}
		if err := c.PolicySets.AddTagSelectors(ctx, ps.ID, tfe.PolicySetAddTagSelectorsOptions{TagSelectors: sixty}); err != nil {
			t.Fatal(err)
		}
		err = c.PolicySets.AddTagSelectors(ctx, ps.ID, tfe.PolicySetAddTagSelectorsOptions{TagSelectors: fifty})
		testenv.WantStatus(t, "selectors past the limit", err, "at most 100 tag selectors; this change would leave it 111")
		if n := len(strings.Fields(read(ps.ID))); n != 61 {
			t.Errorf("after a refused addition the set has %d selectors, want 61", n)
		}
		code, body = e.API(t, "", "POST", "/api/v2/policy-sets/"+ps.ID+"/tag-selectors", `{"data":[{"tag-key":"b1"},{"tag-key":"b2"},{"tag-key":"b3"},`+strings.Join(many[:37], ",")+`]}`)
		if code != 422 || !strings.Contains(string(body), "this change would leave it 101") {
			t.Errorf("one past the limit: %d %s", code, body)
		}

		// Only a caller who manages policies changes selectors.
		member, _ := e.UserClient(t, "acme", "dev@acme.test")
		err = member.PolicySets.AddTagSelectors(ctx, plain.ID, tfe.PolicySetAddTagSelectorsOptions{TagSelectors: []*tfe.PolicySetTagSelector{sel("env", nil, false)}})
		if err == nil {
			t.Error("a member without manage-policies added a tag selector")
		}
		team, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("policy-admins"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ManagePolicies: tfe.Bool(true)}})
		if err != nil {
			t.Fatal(err)
		}
		admin, _ := e.UserClient(t, "acme", "sec@acme.test", team)
		if err := admin.PolicySets.AddTagSelectors(ctx, plain.ID, tfe.PolicySetAddTagSelectorsOptions{TagSelectors: []*tfe.PolicySetTagSelector{sel("env", nil, false)}}); err != nil {
			t.Errorf("a member with manage-policies: %v", err)
		}
		check("after the two members", plain.ID, "+env")
		err = c.PolicySets.AddTagSelectors(ctx, "polset-missing", tfe.PolicySetAddTagSelectorsOptions{TagSelectors: []*tfe.PolicySetTagSelector{sel("env", nil, false)}})
		testenv.WantErr(t, "selectors of a missing set", err, tfe.ErrResourceNotFound)

		// Deleting the set deletes its selectors.
		if err := c.PolicySets.Delete(ctx, ps.ID); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM policy_set_tag_selectors WHERE policy_set_id = ?`, ps.ID).Scan(&n); err != nil || n != 0 {
			t.Errorf("a deleted set left %d selectors (%v)", n, err)
		}
	})
}

// TestTagSelectorsApply: which sets tag selectors apply, on both stores.
// An inclusion applies a non-global set to a workspace whose tags (its
// own or its project's) match: the key and its value, a key-only
// selector only a key-only binding (as HCP Terraform). An exclusion exempts a matching workspace from a global set
// and from a set on its project. An inclusion on a global set changes
// nothing; an exclusion beats an inclusion.
func TestTagSelectorsApply(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "payments"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Projects.AddTagBindings(ctx, prj.ID, tfe.ProjectAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "region", Value: "eu"}}}); err != nil {
			t.Fatal(err)
		}
		names := []string{"prod", "dev", "keyonly", "inproject", "plain"}
		ws := map[string]*tfe.Workspace{}
		for _, name := range names {
			opts := tfe.WorkspaceCreateOptions{Name: tfe.String(name)}
			if name == "inproject" {
				opts.Project = prj
			}
			if ws[name], err = c.Workspaces.Create(ctx, "acme", opts); err != nil {
				t.Fatal(err)
			}
		}
		for name, bs := range map[string][]*tfe.TagBinding{
			"prod":    {{Key: "env", Value: "prod"}, {Key: "team", Value: "web"}},
			"dev":     {{Key: "env", Value: "dev"}},
			"keyonly": {{Key: "env"}},
		} {
			if _, err := c.Workspaces.AddTagBindings(ctx, ws[name].ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: bs}); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			name string
			opts tfe.PolicySetCreateOptions
			want []string // the workspaces it applies to
		}{
			{"a value", tfe.PolicySetCreateOptions{TagSelectors: []*tfe.PolicySetTagSelector{sel("env", tfe.String("prod"), false)}}, []string{"prod"}},
			{"a key only: key-only bindings only", tfe.PolicySetCreateOptions{TagSelectors: []*tfe.PolicySetTagSelector{sel("env", nil, false)}}, []string{"keyonly"}},
			{"any of two", tfe.PolicySetCreateOptions{TagSelectors: []*tfe.PolicySetTagSelector{sel("env", tfe.String("dev"), false), sel("team", tfe.String("web"), false)}}, []string{"prod", "dev"}},
			{"a project's tag", tfe.PolicySetCreateOptions{TagSelectors: []*tfe.PolicySetTagSelector{sel("region", tfe.String("eu"), false)}}, []string{"inproject"}},
			{"beside a workspace", tfe.PolicySetCreateOptions{Workspaces: []*tfe.Workspace{ws["plain"]}, TagSelectors: []*tfe.PolicySetTagSelector{sel("env", tfe.String("dev"), false)}}, []string{"dev", "plain"}},
			{"no match", tfe.PolicySetCreateOptions{TagSelectors: []*tfe.PolicySetTagSelector{sel("env", tfe.String("staging"), false)}}, nil},
			{"global minus a value", tfe.PolicySetCreateOptions{Global: tfe.Bool(true), TagSelectors: []*tfe.PolicySetTagSelector{sel("env", tfe.String("dev"), true)}}, []string{"prod", "keyonly", "inproject", "plain"}},
			{"global minus a key", tfe.PolicySetCreateOptions{Global: tfe.Bool(true), TagSelectors: []*tfe.PolicySetTagSelector{sel("env", nil, true)}}, []string{"prod", "dev", "inproject", "plain"}},
			{"global minus a project's tag", tfe.PolicySetCreateOptions{Global: tfe.Bool(true), TagSelectors: []*tfe.PolicySetTagSelector{sel("region", tfe.String("eu"), true)}}, []string{"prod", "dev", "keyonly", "plain"}},
			{"global with an inclusion", tfe.PolicySetCreateOptions{Global: tfe.Bool(true), TagSelectors: []*tfe.PolicySetTagSelector{sel("env", tfe.String("prod"), false)}}, names},
			{"a project minus a tag", tfe.PolicySetCreateOptions{Projects: []*tfe.Project{prj}, TagSelectors: []*tfe.PolicySetTagSelector{sel("region", tfe.String("eu"), true)}}, nil},
			{"an exclusion beats an inclusion", tfe.PolicySetCreateOptions{TagSelectors: []*tfe.PolicySetTagSelector{sel("env", tfe.String("prod"), false), sel("env", tfe.String("dev"), false), sel("team", tfe.String("web"), true)}}, []string{"dev"}},
		} {
			tc.opts.Name, tc.opts.Kind = tfe.String("set"), tfe.OPA
			set, err := c.PolicySets.Create(ctx, "acme", tc.opts)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var got []string
			for _, name := range names {
				ok, err := e.Server.Policies.Applies(ctx, e.Server.DB, "acme", ws[name].ID, "")
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					got = append(got, name)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("a set by %s applies to %v, want %v", tc.name, got, tc.want)
			}
			if err := c.PolicySets.Delete(ctx, set.ID); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// alwaysPasses is an OPA policy with nothing to deny.
const alwaysPasses = `package terraform.tags

import rego.v1

deny contains msg if {
	false
	msg := "never"
}
`

// TestTagSelectorsDecideRuns: tag selectors decide which sets evaluate a
// real run, on both stores, from the workspace's tags when the run is
// created: an inclusion brings its set's policies in, an exclusion keeps
// a global set out, and a tag added or removed changes that for the next
// run.
func TestTagSelectorsDecideRuns(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		pol, err := c.Policies.Create(ctx, "acme", tfe.PolicyCreateOptions{Name: tfe.String("tags"), Kind: tfe.OPA,
			Query: tfe.String("data.terraform.tags.deny"), EnforcementLevel: tfe.EnforcementMode(tfe.EnforcementMandatory)})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Policies.Upload(ctx, pol.ID, []byte(alwaysPasses)); err != nil {
			t.Fatal(err)
		}
		for _, o := range []tfe.PolicySetCreateOptions{
			{Name: tfe.String("prod-guard"), TagSelectors: []*tfe.PolicySetTagSelector{sel("env", tfe.String("prod"), false)}},
			{Name: tfe.String("org-guard"), Global: tfe.Bool(true), TagSelectors: []*tfe.PolicySetTagSelector{sel("sandbox", nil, true)}},
		} {
			o.Kind, o.Policies = tfe.OPA, []*tfe.Policy{pol}
			if _, err := c.PolicySets.Create(ctx, "acme", o); err != nil {
				t.Fatal(err)
			}
		}
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		evaluatedBy := func() string {
			t.Helper()
			cv := testenv.UploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "x" {}`)
			r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			r = testenv.WaitRun(ctx, t, c, r.ID, tfe.RunPlannedAndFinished, tfe.RunErrored)
			if r.Status != tfe.RunPlannedAndFinished {
				t.Fatalf("run %s ended %s", r.ID, r.Status)
			}
			stages, err := c.TaskStages.List(ctx, r.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			var sets []string
			for _, st := range stages.Items {
				if st.Stage != tfe.PostPlan {
					continue
				}
				for _, ev := range st.PolicyEvaluations {
					l, err := c.PolicySetOutcomes.List(ctx, ev.ID, nil)
					if err != nil {
						t.Fatal(err)
					}
					for _, o := range l.Items {
						if len(o.Outcomes) != 1 || o.Outcomes[0].PolicyName != "tags" || o.Outcomes[0].Status != "passed" {
							t.Errorf("set %s evaluated %+v, want the tags policy passed", o.PolicySetName, o.Outcomes)
						}
						sets = append(sets, o.PolicySetName)
					}
				}
			}
			return strings.Join(sets, " ")
		}
		step := func(what, want string) {
			t.Helper()
			if got := evaluatedBy(); got != want {
				t.Errorf("%s: the run is evaluated by %q, want %q", what, got, want)
			}
		}
		step("no tags", "org-guard")
		if _, err := c.Workspaces.AddTagBindings(ctx, ws.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "env", Value: "prod"}}}); err != nil {
			t.Fatal(err)
		}
		step("env=prod added", "org-guard prod-guard")
		if _, err := c.Workspaces.AddTagBindings(ctx, ws.ID, tfe.WorkspaceAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "sandbox"}}}); err != nil {
			t.Fatal(err)
		}
		step("sandbox added", "prod-guard")
		if err := c.Workspaces.DeleteAllTagBindings(ctx, ws.ID); err != nil {
			t.Fatal(err)
		}
		step("every tag removed", "org-guard")
	})
}
