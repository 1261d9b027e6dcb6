package orchestrator

import (
	"fmt"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/core"
)

func inline(n int) string {
	head := "# "
	return head + strings.Repeat("x", n-len(head))
}

// TestValidation checks that every rule names its field; the full list of
// messages is in testdata/validation.golden.
func TestValidation(t *testing.T) {
	f := false
	cases := []struct {
		name string
		v    interface{ Validate() error }
		want []string // fields that must be reported (exactly these)
	}{
		{"module inline at the limit", &Module{ID: "m1", ResourceType: "pg", ModuleSourceCode: inline(2000)}, nil},
		{"module inline over the limit", &Module{ID: "m1", ResourceType: "pg", ModuleSourceCode: inline(2001)}, []string{"module_source_code"}},
		{"module inline limit counts characters", &Module{ID: "m1", ResourceType: "pg", ModuleSourceCode: strings.Repeat("é", 2000)}, nil},
		{"module both sources", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "/mnt/x", ModuleSourceCode: "x"}, []string{"module_source_code"}},
		{"module no source", &Module{ID: "m1", ResourceType: "pg"}, []string{"module_source"}},
		{"module sources accepted", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "git::https://github.com/o/r//sub?ref=v1"}, nil},
		{"module ssh", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "git::ssh://git@github.com/o/r.git"}, nil},
		{"module registry", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "acme/pg/aws@1.0.0"}, nil},
		{"module bare github", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "github.com/o/r"}, []string{"module_source"}},
		{"module bare github subdir", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "github.com/org/repo//dir?ref=v1"}, []string{"module_source"}},
		{"module bare bitbucket", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "bitbucket.org/org/repo/x/y"}, []string{"module_source"}},
		{"module git http", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "git::http://127.0.0.1:8080/repo.git//my-namespace-module?ref=v1"}, nil},
		{"module git ref empty", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "git::https://example.test/repo.git?ref="}, []string{"module_source"}},
		{"module git other scheme", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "git::file:///tmp/repo"}, []string{"module_source"}},
		{"module source too long", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "/" + strings.Repeat("a", 200)}, []string{"module_source"}},
		{"module ids", &Module{ID: "Bad_Id", ResourceType: "-pg", ModuleSource: "/x"}, []string{"id", "resource_type"}},
		// A param may also be an input (params win at render time).
		{"module params may overlap inputs", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "/x",
			ModuleParams: map[string]ModuleParam{"size": {Type: "number"}, "name": {Type: "text"}},
			ModuleInputs: map[string]any{"size": 1}}, []string{"module_params.name.type"}},
		{"module placeholders", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "/x",
			ModuleInputs: map[string]any{
				"a": "${resources.nope.outputs.x}", "b": "${shared.dns.outputs.x}", "c": "${context.nope}", "d": "${oops",
				"e": map[string]any{"deep": []any{"${var.X}"}}, "ok": "${resources.db.outputs.host} ${self.outputs.x} ${select.consumers('workload').outputs.x}"},
			Dependencies: map[string]Request{"db": {Type: "pg", Class: "@-beta", ID: "@-primary", Params: map[string]any{"p": "${context.res_id}"}}}},
			[]string{"module_inputs.a", "module_inputs.b", "module_inputs.c", "module_inputs.d", "module_inputs.e.deep[0]"}},
		{"module dependencies and coprovisioned", &Module{ID: "m1", ResourceType: "pg", ModuleSource: "/x",
			ProviderMapping: map[string]string{"aws": "aws", "gcp": "google.eu-1"},
			Dependencies:    map[string]Request{"db": {Class: "bad class"}},
			Coprovisioned:   []Coprovisioned{{Request: Request{Type: "dns", ID: "UPPER"}}}},
			[]string{"coprovisioned[0].id", "dependencies.db.class", "dependencies.db.type", "provider_mapping.aws"}},
		{"rule env and env type", &ModuleRule{ModuleID: "m1", EnvTypeID: "dev", EnvID: "dev-1"}, []string{"env_id", "project_id"}},
		{"rule ok", &ModuleRule{ModuleID: "m1", ResourceClass: "large", ResourceID: "main", ProjectID: "p1", EnvID: "e1"}, nil},
		{"rule missing module", &ModuleRule{}, []string{"module_id"}},
		{"project", &Project{ID: "1abc", DisplayName: "x"}, []string{"display_name", "id"}},
		{"environment", &Environment{ID: "dev"}, []string{"env_type_id", "project_id"}},
		{"environment type", &EnvironmentType{ID: "development"}, nil},
		{"resource type", &ResourceType{ID: "postgres", IsDeveloperAccessible: &f}, []string{"output_schema"}},
		{"provider", &Provider{ProviderType: "Aws", ID: "eu", Source: "x", Configuration: map[string]any{"r": "${resources.x.outputs.y}"}},
			[]string{"configuration.r", "provider_type", "source", "version_constraint"}},
		{"manifest", &Manifest{
			Shared: map[string]Request{"dns": {Type: "dns", Params: map[string]any{"x": "${shared.dns.outputs.y}"}}},
			Workloads: map[string]Workload{
				"Web": {Outputs: map[string]string{"A": "${resources.db.outputs.x}"}},
				"api": {Resources: map[string]Request{"db": {Type: "pg", Class: "@x", ID: "a_b"}}, Outputs: map[string]string{"B": "${self.outputs.x}", "C": "${shared.dns.outputs.host}"}},
			}},
			[]string{"shared.dns.params.x", "workloads.Web", "workloads.Web.outputs.A", "workloads.api.outputs.B", "workloads.api.resources.db.class", "workloads.api.resources.db.id"}},
	}
	var out strings.Builder
	for _, c := range cases {
		err := c.v.Validate()
		fe := FieldErrors(err)
		var got []string
		seen := map[string]bool{}
		fmt.Fprintf(&out, "== %s\n", c.name)
		for _, e := range fe {
			if !seen[e.Field] {
				got = append(got, e.Field)
				seen[e.Field] = true
			}
			fmt.Fprintf(&out, "%s: %s\n", e.Field, e.Detail)
		}
		if strings.Join(got, ",") != strings.Join(sortedStrings(c.want), ",") && strings.Join(sortedStrings(got), ",") != strings.Join(sortedStrings(c.want), ",") {
			t.Errorf("%s: fields %v, want %v (%v)", c.name, got, c.want, err)
		}
		if err != nil && core.KindOf(err) != core.KindInvalid {
			t.Errorf("%s: kind %v, want KindInvalid", c.name, core.KindOf(err))
		}
	}
	golden(t, "validation", out.String())
}

func sortedStrings(s []string) []string {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return sortedKeys(m)
}

func TestCompileErrorKind(t *testing.T) {
	c := loadCase(t, "cycle")
	_, err := Compile(&c.Catalogue, c.Context, &c.Manifest)
	if core.KindOf(err) != core.KindInvalid {
		t.Fatalf("kind of %v = %v", err, core.KindOf(err))
	}
	bad := &Manifest{Workloads: map[string]Workload{"1x": {}}}
	if _, err := Compile(&c.Catalogue, c.Context, bad); FieldErrors(err) == nil {
		t.Fatalf("a malformed manifest gives %v, want field errors", err)
	}
}

func TestCheckModule(t *testing.T) {
	cat := &Catalogue{
		ResourceTypes: []*ResourceType{{ID: "pg"}, {ID: "dns"}},
		Providers:     []*Provider{{ProviderType: "aws", ID: "eu"}},
	}
	ok := &Module{ID: "m1", ResourceType: "pg", ModuleSource: "/x", ProviderMapping: map[string]string{"aws": "aws.eu"},
		Dependencies: map[string]Request{"d": {Type: "dns"}}, Coprovisioned: []Coprovisioned{{Request: Request{Type: "pg"}}}}
	if err := cat.CheckModule(ok); err != nil {
		t.Fatal(err)
	}
	bad := &Module{ID: "m1", ResourceType: "nope", ModuleSource: "/x", ProviderMapping: map[string]string{"aws": "aws.us"},
		Dependencies: map[string]Request{"d": {Type: "x1"}}, Coprovisioned: []Coprovisioned{{Request: Request{Type: "x2"}}}}
	var fields []string
	for _, e := range FieldErrors(cat.CheckModule(bad)) {
		fields = append(fields, e.Field)
	}
	if got := strings.Join(fields, ","); got != "resource_type,dependencies.d.type,coprovisioned[0].type,provider_mapping.aws" {
		t.Fatalf("fields %s", got)
	}
}
