package stack

import (
	"os"
	"testing"
)

// FuzzParse feeds arbitrary bytes as a component file and as a deployment
// file: parsing (and, on what parsed, compiling each deployment and
// evaluating auto-approval) must return diagnostics, never panic, and
// every error must carry a summary.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"components.tfcomponent.hcl", "deployments.tfdeploy.hcl"} {
		b, err := os.ReadFile("testdata/twotier/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, []byte(stackFiles()["main.tfdeploy.hcl"]))
		f.Add(stackFiles()["main.tfcomponent.hcl"], b)
	}
	f.Add([]byte("component \"a\" {\n  source = \"${\"\n}"), []byte("deployment \"x\" { inputs = { a = [for"))
	f.Add([]byte("provider \"a\" \"b\" { config { x = component.a[0].y } }"), []byte("deployment_group \"g\" { auto_approve_checks = [1] }"))
	f.Fuzz(func(t *testing.T, comp, deploy []byte) {
		cfg, diags := Parse(map[string][]byte{"f.tfcomponent.hcl": comp, "f.tfdeploy.hcl": deploy})
		for _, d := range diags {
			if d.Summary == "" {
				t.Fatalf("diagnostic without a summary: %+v", d)
			}
			if s := d.Snippet; s != nil && (s.HighlightStartOffset < 0 || s.HighlightEndOffset > len(s.Code) || s.HighlightStartOffset > s.HighlightEndOffset) {
				t.Fatalf("snippet offsets out of range: %+v", s)
			}
		}
		if cfg == nil || diags.HasErrors() {
			return
		}
		for _, dep := range cfg.Deployments {
			if out, diags := cfg.Compile(dep.Name); out == nil && !diags.HasErrors() {
				t.Fatalf("Compile(%s) returned nothing and no error", dep.Name)
			}
		}
		for _, g := range cfg.DeploymentGroups {
			for _, dep := range cfg.Deployments {
				cfg.AutoApprove(g.Name, PlanContext{Success: true, Deployment: dep.Name, Changes: ChangeCounts{Add: 1, Total: 1}})
			}
		}
	})
}
