package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/core"
)

func plan(inputs ...string) map[string]any {
	var rcs []any
	for i, in := range inputs {
		rcs = append(rcs, map[string]any{"address": "terraform_data.r" + string(rune('a'+i)), "type": "terraform_data",
			"change": map[string]any{"after": map[string]any{"input": in}}})
	}
	return map[string]any{"plan": map[string]any{"resource_changes": rcs}, "run": map[string]any{"id": "run-1"},
		"workspace": map[string]any{"name": "app"}}
}

const denyV1 = `package terraform
import rego.v1
deny contains msg if {
	some rc in input.plan.resource_changes
	rc.change.after.input == "bad"
	msg := sprintf("%s is bad", [rc.address])
}
`

// TestEvalOPA: HCP Terraform's rule (the query returns the violations:
// empty or undefined passes, anything in it fails), in both Rego
// syntaxes, and a query returning something else errors its policy.
func TestEvalOPA(t *testing.T) {
	t.Parallel()
	v0 := `package legacy
rule["not allowed"] { input.workspace.name == "app" }
`
	modules := map[string]string{"deny.rego": denyV1, "legacy.rego": v0}
	policies := []opaPolicy{
		{Name: "deny", Query: "data.terraform.deny", Level: Mandatory},
		{Name: "legacy", Query: "data.legacy.rule", Level: Advisory},
		{Name: "undefined", Query: "data.nothing.here", Level: Mandatory},
		{Name: "boolean", Query: "true", Level: Mandatory},
	}
	for _, tc := range []struct {
		name string
		in   map[string]any
		want []string
	}{
		{"violations", plan("ok", "bad"), []string{OutcomeFailed, OutcomeFailed, OutcomePassed, OutcomeErrored}},
		{"none", plan("ok"), []string{OutcomePassed, OutcomeFailed, OutcomePassed, OutcomeErrored}},
	} {
		out, err := evalOPA(context.Background(), modules, policies, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range out {
			if o.Status != tc.want[i] {
				t.Errorf("%s: policy %s is %s, want %s (%s)", tc.name, o.PolicyName, o.Status, tc.want[i], o.Description)
			}
		}
	}
}

// TestEvalOPARefusesBadPolicies: syntax errors and built-ins that reach
// the network or the server's runtime are refused as invalid input,
// naming the problem.
func TestEvalOPARefusesBadPolicies(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"syntax":      "package x\ndeny contains msg if {",
		"http.send":   "package x\nimport rego.v1\ndeny contains r if { r := http.send({\"method\": \"get\", \"url\": \"http://169.254.169.254/\"}) }",
		"opa.runtime": "package x\nimport rego.v1\ndeny contains r if { r := opa.runtime() }",
	} {
		_, err := evalOPA(context.Background(), map[string]string{"x.rego": src}, []opaPolicy{{Name: "x", Query: "data.x.deny", Level: Mandatory}}, plan())
		if core.KindOf(err) != core.KindInvalid {
			t.Errorf("%s: err %v, want an invalid-input error", name, err)
		}
	}
}

// TestOPAContent: a version's policies.hcl names the queries; a version
// without one, or with a bad level, is refused with the reason.
func TestOPAContent(t *testing.T) {
	t.Parallel()
	hcl := `policy "deny" {
  query             = "data.terraform.deny"
  enforcement_level = "mandatory"
}
`
	mods, pols, err := opaContent(versionFiles{"policies.hcl": hcl, "deny.rego": denyV1, "deny_test.rego": "package t"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) != 1 || len(pols) != 1 || pols[0].Query != "data.terraform.deny" || pols[0].Level != Mandatory {
		t.Fatalf("modules %v policies %+v", mods, pols)
	}
	if _, _, err := opaContent(versionFiles{"deny.rego": denyV1}, ""); err == nil || !strings.Contains(err.Error(), "policies.hcl") {
		t.Fatalf("without policies.hcl: %v", err)
	}
	bad := strings.Replace(hcl, `"mandatory"`, `"hard-mandatory"`, 1)
	if _, _, err := opaContent(versionFiles{"policies.hcl": bad, "deny.rego": denyV1}, ""); core.KindOf(err) != core.KindInvalid {
		t.Fatalf("an OPA policy with a Sentinel level: %v", err)
	}
}
