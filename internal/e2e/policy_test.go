package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// forbiddenConfig plans a resource the policies below deny.
const forbiddenConfig = `
resource "terraform_data" "db" {
  input = "forbidden"
}
`

// denyForbidden is a Rego v1 policy on HCP Terraform's input: it denies
// every terraform_data whose input is "forbidden".
const denyForbidden = `package terraform.guard

import rego.v1

deny contains msg if {
	some rc in input.plan.resource_changes
	rc.type == "terraform_data"
	rc.change.after.input == "forbidden"
	msg := sprintf("%s is forbidden", [rc.address])
}
`

// warnWorkspace is a Rego v0 policy (the syntax of policies written for
// OPA before 1.0) that reads the workspace part of the input.
const warnWorkspace = `package terraform.naming

warn[msg] {
	input.workspace.name == "cli"
	input.run.organization.name == "acme"
	msg := "workspace cli should be renamed"
}
`

// TestPolicyEndToEnd evaluates OPA policies on real plans, on both
// stores: a mandatory policy that denies a resource stops the run before
// apply (nothing applied) and an override lets it apply; without
// override a failing non-overridable set errors the run; an advisory
// policy applies with a warning that terraform apply prints through the
// cloud block; a policy set tarball with a path traversal or a huge file is
// refused cleanly.
func TestPolicyEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	eng := engines(t)[0]
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel() // see parallel in TestMain
			e := testenv.New(t, testenv.Options{Store: st})
			testPolicies(t, e, newEngineCLI(t, e, eng))
		})
	}
}

func testPolicies(t *testing.T, e *testenv.Env, c *cli) {
	ctx := context.Background()
	api := e.Client
	testenv.NewOrg(t, api, "acme")
	newWorkspace := func(name string) *tfe.Workspace {
		ws, err := api.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name), ExecutionMode: tfe.String("remote"), AutoApply: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	newPolicy := func(name, query, src string, level tfe.EnforcementLevel) *tfe.Policy {
		p, err := api.Policies.Create(ctx, "acme", tfe.PolicyCreateOptions{Name: tfe.String(name), Kind: tfe.OPA, Query: tfe.String(query),
			EnforcementLevel: &level, Description: tfe.String(name + " policy")})
		if err != nil {
			t.Fatal(err)
		}
		if err := api.Policies.Upload(ctx, p.ID, []byte(src)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newSet := func(name string, overridable bool, p *tfe.Policy, ws ...*tfe.Workspace) *tfe.PolicySet {
		ps, err := api.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String(name), Kind: tfe.OPA,
			Overridable: tfe.Bool(overridable), Policies: []*tfe.Policy{p}, Workspaces: ws})
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	noState := func(ws *tfe.Workspace) {
		t.Helper()
		if _, err := api.StateVersions.ReadCurrent(ctx, ws.ID); err != tfe.ErrResourceNotFound {
			t.Fatalf("workspace %s has a state (%v), want none: nothing may have been applied", ws.Name, err)
		}
	}
	postPlan := func(r *tfe.Run) (*tfe.TaskStage, []*tfe.PolicySetOutcome) {
		t.Helper()
		st := stagesOf(ctx, t, api, r.ID)["post_plan"]
		if st == nil || len(st.PolicyEvaluations) != 1 {
			t.Fatalf("run %s: post-plan stage %+v, want one with a policy evaluation", r.ID, st)
		}
		l, err := api.PolicySetOutcomes.List(ctx, st.PolicyEvaluations[0].ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st, l.Items
	}
	guard := newPolicy("guard", "data.terraform.guard.deny", denyForbidden, tfe.EnforcementMandatory)

	// 1. A mandatory policy denies the resource: the run waits before
	// apply; only a user with policy-overrides may let it go on.
	guarded := newWorkspace("guarded")
	newSet("guardrails", true, guard, guarded)
	r := createRun(ctx, t, api, guarded.ID, uploadConfig(ctx, t, api, guarded.ID, forbiddenConfig).ID, nil)
	r = waitRun(ctx, t, api, r.ID, 3*time.Minute, tfe.RunPostPlanAwaitingDecision, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunPostPlanAwaitingDecision {
		t.Fatalf("a run denied by a mandatory overridable policy is %s, want post_plan_awaiting_decision", r.Status)
	}
	noState(guarded)
	st, outcomes := postPlan(r)
	if st.Status != tfe.TaskStageAwaitingOverride || len(outcomes) != 1 || outcomes[0].PolicySetName != "guardrails" ||
		len(outcomes[0].Outcomes) != 1 || outcomes[0].Outcomes[0].Status != "failed" || outcomes[0].ResultCount.MandatoryFailed != 1 {
		t.Fatalf("stage %s with outcomes %+v; want awaiting_override and guard failed", st.Status, outcomes)
	}
	member, _ := e.UserClient(t, "acme", "dev@acme.test")
	if _, err := member.TaskStages.Override(ctx, st.ID, tfe.TaskStageOverrideOptions{}); err == nil {
		t.Fatal("a member without policy-overrides overrode the stage")
	}
	if _, err := api.TaskStages.Override(ctx, st.ID, tfe.TaskStageOverrideOptions{Comment: tfe.String("approved by security")}); err != nil {
		t.Fatal(err)
	}
	r = waitRun(ctx, t, api, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunApplied {
		t.Fatalf("an overridden run ended %s", r.Status)
	}
	if _, err := api.StateVersions.ReadCurrent(ctx, guarded.ID); err != nil {
		t.Fatalf("the overridden run applied nothing: %v", err)
	}
	if l, err := api.PolicyEvaluations.List(ctx, st.ID, nil); err != nil || len(l.Items) != 1 || l.Items[0].Status != tfe.PolicyEvaluationOverridden {
		t.Fatalf("after the override the policy evaluation is %+v (%v), want overridden", l, err)
	}

	// 2. The same policy in a set that may not be overridden errors the
	// run; nothing is applied.
	strict := newWorkspace("strict")
	newSet("strict-guardrails", false, guard, strict)
	r = createRun(ctx, t, api, strict.ID, uploadConfig(ctx, t, api, strict.ID, forbiddenConfig).ID, nil)
	r = waitRun(ctx, t, api, r.ID, 3*time.Minute, tfe.RunErrored, tfe.RunApplied, tfe.RunPostPlanAwaitingDecision)
	if r.Status != tfe.RunErrored || r.Apply.Status == tfe.ApplyFinished {
		t.Fatalf("a run denied by a mandatory non-overridable policy ended %s (apply %s)", r.Status, r.Apply.Status)
	}
	noState(strict)
	if st, _ := postPlan(r); st.Status != tfe.TaskStageFailed {
		t.Fatalf("post-plan stage is %s, want failed", st.Status)
	}

	// 3. An advisory policy applies, and terraform apply through the
	// cloud block shows the warning.
	dir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, "acme", "cli") + forbiddenConfig})
	c.run(dir, "init")
	cliWS, err := api.Workspaces.Read(ctx, "acme", "cli")
	if err != nil {
		t.Fatal(err)
	}
	naming := newPolicy("naming", "data.terraform.naming.warn", warnWorkspace, tfe.EnforcementAdvisory)
	newSet("conventions", false, naming, cliWS)
	out := c.run(dir, "apply", "-auto-approve")
	for _, want := range []string{"OPA Policy Evaluation", "PASSED (with advisory)", "conventions", "naming", "Advisory", "Apply complete!"} {
		if !strings.Contains(out, want) {
			t.Fatalf("terraform apply output lacks %q:\n%s", want, out)
		}
	}
	runs, err := api.Runs.List(ctx, cliWS.ID, nil)
	if err != nil || len(runs.Items) == 0 {
		t.Fatalf("runs of cli: %v", err)
	}
	_, outcomes = postPlan(runs.Items[0])
	if len(outcomes) != 1 || outcomes[0].ResultCount.AdvisoryFailed != 1 || outcomes[0].Outcomes[0].EnforcementLevel != tfe.EnforcementAdvisory {
		t.Fatalf("advisory outcomes %+v", outcomes)
	}

	// 4. Versioned sets: an archive with a path traversal or a file over
	// the size limit is refused with the reason; the set keeps no version.
	versioned, err := api.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("uploaded"), Kind: tfe.OPA})
	if err != nil {
		t.Fatal(err)
	}
	for name, archive := range map[string][]byte{
		"a path traversal": tarball(t, map[string][]byte{"policies.hcl": nil, "../../escape.rego": []byte(denyForbidden)}),
		"a huge file":      tarball(t, map[string][]byte{"policies.hcl": nil, "big.rego": make([]byte, 11<<20)}),
	} {
		v, err := api.PolicySetVersions.Create(ctx, versioned.ID)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := v.Links["upload"].(string)
		req, _ := http.NewRequest(http.MethodPut, u, bytes.NewReader(archive))
		req.Header.Set("Content-Type", "application/octet-stream")
		res, err := e.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("uploading %s: HTTP %d, want 422", name, res.StatusCode)
		}
		v, err = api.PolicySetVersions.Read(ctx, v.ID)
		if err != nil || v.Status != tfe.PolicySetVersionErrored || v.Error == "" {
			t.Fatalf("after uploading %s the version is %+v (%v), want errored with the reason", name, v, err)
		}
	}
	ps, err := api.PolicySets.Read(ctx, versioned.ID)
	if err != nil || ps.CurrentVersion != nil {
		t.Fatalf("a set whose uploads were refused has current version %+v (%v)", ps.CurrentVersion, err)
	}
}

// tarball packs files into a gzipped tar, names as given (even hostile
// ones).
func tarball(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
