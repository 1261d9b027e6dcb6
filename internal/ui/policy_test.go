package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// A run stopped by a mandatory OPA policy shows, on its page, which set
// and which policy failed; a member without policy-overrides gets no
// override, and one who has it overrides from the page: the run applies
// (real terraform, OPA on the real plan), and the audit trail holds the
// override as the API's.
func TestRunPageShowsPolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("guarded"), AutoApply: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	level := tfe.EnforcementMandatory
	p, err := e.Client.Policies.Create(ctx, "acme", tfe.PolicyCreateOptions{Name: tfe.String("no-forbidden"), Kind: tfe.OPA,
		Query: tfe.String("data.terraform.guard.deny"), EnforcementLevel: &level, Description: tfe.String("nothing may be forbidden")})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Policies.Upload(ctx, p.ID, []byte(`package terraform.guard

import rego.v1

deny contains msg if {
	some rc in input.plan.resource_changes
	rc.change.after.input == "forbidden"
	msg := sprintf("%s is forbidden", [rc.address])
}
`)); err != nil {
		t.Fatal(err)
	}
	set, err := e.Client.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("guardrails"), Kind: tfe.OPA,
		Overridable: tfe.Bool(true), Policies: []*tfe.Policy{p}, Workspaces: []*tfe.Workspace{ws}})
	if err != nil {
		t.Fatal(err)
	}
	cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, "resource \"terraform_data\" \"db\" {\n  input = \"forbidden\"\n}\n")
	r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, r.ID, tfe.RunPostPlanAwaitingDecision)
	page := "/app/acme/workspaces/guarded/runs/" + r.ID

	// A member who may read the workspace's runs (no policy-overrides)
	// sees why, and no override.
	team, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("devs")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: team, Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	_, m := e.UserClient(t, "acme", "dev@acme.test", team)
	_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
	if err != nil {
		t.Fatal(err)
	}
	member := newTab(t, e, secret)
	member.open(page)
	stage := member.text("#stage-post_plan")
	for _, want := range []string{"Post-plan Awaiting override", "Policy set guardrails (opa, overridable): 0 passed, 1 mandatory failed", "no-forbidden (mandatory): Failed nothing may be forbidden"} {
		if !strings.Contains(strings.Join(strings.Fields(stage), " "), want) {
			t.Fatalf("the post-plan stage on the run page lacks %q:\n%s", want, stage)
		}
	}
	if member.exists("#override") {
		t.Fatal("a member without policy-overrides is offered the override")
	}
	if strings.Contains(stage, "overridden") {
		t.Fatalf("the stage reads overridden before anyone overrode it:\n%s", stage)
	}
	// The set's name links to its page, which the member reads.
	setLink := "#stage-post_plan .policy-set a"
	if got := linkOf(member, setLink); got != e.URL+"/app/acme/policy-sets/"+set.ID {
		t.Fatalf("the set's name links to %q, want its page", got)
	}
	member.press(setLink)
	member.waitLocation("/app/acme/policy-sets/" + set.ID)
	if got := shown(member, "h1"); got != "Policy set guardrails" {
		t.Fatalf("the set's link lands on a page headed %q", got)
	}

	// The site admin overrides: the run applies.
	tb := newTab(t, e, e.Token)
	tb.open(page)
	tb.do(chromedp.SendKeys(chromedp.CSS(`#override input[name=comment]`), "approved by security"))
	tb.press(`#override button`)
	if got := testenv.WaitRunWithin(ctx, t, e.Client, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored); got.Status != tfe.RunApplied {
		t.Fatalf("the overridden run ended %s", got.Status)
	}
	tb.open(page)
	if tb.exists("#override") || !strings.Contains(tb.text("#stage-post_plan"), "Passed") {
		t.Fatalf("after the override the stage reads %q (override offered: %v)", tb.text("#stage-post_plan"), tb.exists("#override"))
	}
	// The stage's status is passed; the page says a user overrode it,
	// each status in words, the API's value kept in data-status.
	if got := strings.Fields(tb.text("#stage-post_plan")); len(got) < 3 || got[0] != "Post-plan" || got[1] != "Passed" || got[2] != "Overridden" {
		t.Fatalf("after the override the stage does not read Post-plan Passed Overridden: %q", strings.Join(got, " "))
	}
	if !tb.exists(`#stage-post_plan > span.status[data-status="passed"]`) {
		t.Fatal("the stage's status badge keeps no data-status=passed")
	}
	tb.screenshot("run-policies")
	wantPageEvent(t, e, "task-stage", "override", "", http.StatusOK)

	// The outcome outlives its set: once the set is deleted the page still
	// names it, unlinked.
	if err := e.Client.PolicySets.Delete(ctx, set.ID); err != nil {
		t.Fatal(err)
	}
	tb.open(page)
	if got := squash(tb.text("#stage-post_plan .policy-set")); !strings.HasPrefix(got, "Policy set guardrails (opa, overridable)") || tb.exists(setLink) {
		t.Fatalf("the outcome of a deleted set reads %q (linked: %v)", got, tb.exists(setLink))
	}
}
