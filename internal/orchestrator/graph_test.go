package orchestrator

import (
	"strings"
	"testing"
)

func inlineMod(id, typ string) *Module {
	return &Module{ID: id, ResourceType: typ, ModuleSourceCode: `output "id" { value = "x" }`}
}

func edgesOf(g *Graph) string {
	var out []string
	for _, e := range g.Edges() {
		out = append(out, e.From.Coord.String()+" -> "+e.To.Coord.String())
	}
	return strings.Join(out, "\n")
}

// TestRuleSpecificity: env_id beats project_id beats env_type_id beats a
// rule with none; a rule for the exact resource id beats them all; rules
// for other projects or environments never apply.
func TestRuleSpecificity(t *testing.T) {
	ctx := Context{OrgID: "o", ProjectID: "shop", EnvID: "dev", EnvTypeID: "development"}
	mods := []*Module{inlineMod("generic", "pg"), inlineMod("by-type", "pg"), inlineMod("by-project", "pg"),
		inlineMod("by-env", "pg"), inlineMod("by-id", "pg"), inlineMod("elsewhere", "pg")}
	specific := []*ModuleRule{ // most specific first
		{ID: "4", ModuleID: "by-env", ProjectID: "shop", EnvID: "dev"},
		{ID: "3", ModuleID: "by-project", ProjectID: "shop"},
		{ID: "2", ModuleID: "by-type", EnvTypeID: "development"},
		{ID: "1", ModuleID: "generic"},
	}
	others := []*ModuleRule{
		{ID: "5", ModuleID: "by-id", ResourceID: "special"},
		{ID: "6", ModuleID: "elsewhere", ProjectID: "other", EnvID: "dev"},
		{ID: "7", ModuleID: "elsewhere", EnvTypeID: "production"},
	}
	m := &Manifest{Shared: map[string]Request{"db": {Type: "pg", ID: "main"}, "sp": {Type: "pg", ID: "special"}}}
	for n, want := range []string{"by-env", "by-project", "by-type", "generic"} {
		rules := append(append([]*ModuleRule{}, others...), specific[n:]...)
		cat := &Catalogue{ResourceTypes: []*ResourceType{{ID: "pg"}}, Modules: mods, Rules: rules}
		g, err := Compile(cat, ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Node(Coord{"pg", "default", "main"}).Module.ID; got != want {
			t.Errorf("with rules %d..: module %s, want %s", n+1, got, want)
		}
		if got := g.Node(Coord{"pg", "default", "special"}).Module.ID; got != "by-id" {
			t.Errorf("resource id rule: module %s", got)
		}
	}
	cat := &Catalogue{ResourceTypes: []*ResourceType{{ID: "pg"}}, Modules: mods, Rules: others[1:]}
	_, err := Compile(cat, ctx, &Manifest{Shared: map[string]Request{"db": {Type: "pg", ID: "main"}}})
	ce, ok := err.(*CompileError)
	if !ok || len(ce.Errors) != 1 || ce.Errors[0].Code != ErrNoRuleMatch {
		t.Fatalf("rules of other environments applied: %v", err)
	}
}

// TestCopyDependentsChain: a coprovisioned node that itself copies its
// dependents onto its own coprovisioned node passes the parent on.
func TestCopyDependentsChain(t *testing.T) {
	cur := inlineMod("cur", "cur")
	cur.Coprovisioned = []Coprovisioned{{Request: Request{Type: "aa"}, CopyDependentsFromCurrent: true, IsDependentOnCurrent: true}}
	aa := inlineMod("aa", "aa")
	aa.Coprovisioned = []Coprovisioned{{Request: Request{Type: "bb", Params: map[string]any{"from": "${self.outputs.id}"}}, CopyDependentsFromCurrent: true}}
	bb := inlineMod("bb", "bb")
	bb.ModuleParams = map[string]ModuleParam{"from": {Type: "string"}}
	parent := inlineMod("parent", "parent")
	parent.Dependencies = map[string]Request{"c": {Type: "cur"}}
	cat := &Catalogue{
		ResourceTypes: []*ResourceType{{ID: "cur"}, {ID: "aa"}, {ID: "bb"}, {ID: "parent"}},
		Modules:       []*Module{cur, aa, bb, parent},
		Rules:         []*ModuleRule{{ModuleID: "cur"}, {ModuleID: "aa"}, {ModuleID: "bb"}, {ModuleID: "parent"}},
	}
	g, err := Compile(cat, Context{}, &Manifest{Shared: map[string]Request{"p": {Type: "parent", ID: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"aa.default#x -> cur.default#x",    // is_dependent_on_current
		"bb.default#x -> aa.default#x",     // ${self.outputs.id} in the params aa gives bb
		"parent.default#x -> aa.default#x", // copied from cur
		"parent.default#x -> bb.default#x", // copied from aa, whose dependents now include parent
		"parent.default#x -> cur.default#x",
	}, "\n")
	if got := edgesOf(g); got != want {
		t.Fatalf("edges:\n%s\nwant:\n%s", got, want)
	}
	files, err := g.Terraform()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(files["main.tf"]), "from       = module.aa_default_x_") {
		t.Errorf("self placeholder not rendered as the definer's output:\n%s", files["main.tf"])
	}
}
