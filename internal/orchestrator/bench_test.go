package orchestrator

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

const dagModuleCode = `variable "a" {}
variable "b" {}
resource "terraform_data" "this" {
  input = [var.a, var.b]
}
output "id" {
  value = terraform_data.this.id
}
`

// randomDAG builds a catalogue and manifest whose graph is a random DAG of n
// resource nodes (plus one workload node) where every node but the last
// three depends on three others: the next node (so all are reachable from
// the shared root) and two random later ones. Each node has its own module,
// selected by a module rule on its resource id; its inputs refer to its
// dependencies' outputs, bare and interpolated.
func randomDAG(n int, seed int64) (*Catalogue, *Manifest, map[[2]int]bool) {
	rnd := rand.New(rand.NewSource(seed))
	cat := &Catalogue{ResourceTypes: []*ResourceType{{ID: "node", OutputSchema: map[string]any{"type": "object"}}}}
	edges := map[[2]int]bool{}
	for i := 0; i < n; i++ {
		deps := map[string]Request{}
		var targets []int
		if i+1 < n {
			targets = append(targets, i+1)
		}
		for len(targets) < 3 && i+len(targets) < n-1 {
			j := i + 1 + rnd.Intn(n-i-1)
			dup := false
			for _, t := range targets {
				dup = dup || t == j
			}
			if !dup {
				targets = append(targets, j)
			}
		}
		inputs := map[string]any{"a": nil, "b": "none"}
		for k, j := range targets {
			deps[fmt.Sprintf("d%d", k)] = Request{Type: "node", ID: fmt.Sprintf("r%d", j)}
			edges[[2]int{i, j}] = true
		}
		if len(targets) > 0 {
			inputs["a"] = "${resources.d0.outputs.id}"
			inputs["b"] = "x-${resources.d" + fmt.Sprint(len(targets)-1) + ".outputs.id}"
		}
		id := fmt.Sprintf("m%d", i)
		cat.Modules = append(cat.Modules, &Module{ID: id, ResourceType: "node", ModuleSourceCode: dagModuleCode, ModuleInputs: inputs, Dependencies: deps})
		cat.Rules = append(cat.Rules, &ModuleRule{ModuleID: id, ResourceID: fmt.Sprintf("r%d", i)})
	}
	m := &Manifest{
		Shared: map[string]Request{"root": {Type: "node", ID: "r0"}},
		Workloads: map[string]Workload{"app": {
			Outputs: map[string]string{"ROOT": "${shared.root.outputs.id}"}}},
	}
	return cat, m, edges
}

var benchCtx = Context{OrgID: "acme", ProjectID: "shop", EnvID: "dev", EnvTypeID: "development"}

// TestRandomDAG checks a random DAG's nodes and edges exactly, and runs
// terraform validate on its configuration.
func TestRandomDAG(t *testing.T) {
	const n = 300
	cat, m, want := randomDAG(n, 1)
	g, err := Compile(cat, benchCtx, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Nodes) != n+1 {
		t.Fatalf("%d nodes, want %d", len(g.Nodes), n+1)
	}
	got := map[[2]int]bool{}
	for _, e := range g.JSON().Edges {
		if e.From.Type == WorkloadType {
			if e.To.ID != "r0" {
				t.Errorf("workload edge to %v", e.To)
			}
			continue
		}
		var i, j int
		fmt.Sscanf(e.From.ID, "r%d", &i)
		fmt.Sscanf(e.To.ID, "r%d", &j)
		got[[2]int{i, j}] = true
	}
	if len(got) != len(want) {
		t.Fatalf("%d edges, want %d", len(got), len(want))
	}
	for e := range want {
		if !got[e] {
			t.Errorf("missing edge r%d -> r%d", e[0], e[1])
		}
	}
	env := tfEnv(t)
	dir := t.TempDir()
	if err := g.WriteTerraform(dir); err != nil {
		t.Fatal(err)
	}
	terraform(t, env, dir, "init", "-input=false", "-no-color")
	if out := terraform(t, env, dir, "validate", "-no-color"); !strings.Contains(out, "The configuration is valid") {
		t.Fatal(out)
	}
}

// BenchmarkCompile10k compiles a 10,000-node random DAG (fan-out 3) and
// renders it as Terraform.
func BenchmarkCompile10k(b *testing.B) {
	cat, m, _ := randomDAG(10000, 1)
	b.Run("compile", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := Compile(cat, benchCtx, m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compile+terraform", func(b *testing.B) {
		b.ReportAllocs()
		var size int
		for i := 0; i < b.N; i++ {
			g, err := Compile(cat, benchCtx, m)
			if err != nil {
				b.Fatal(err)
			}
			files, err := g.Terraform()
			if err != nil {
				b.Fatal(err)
			}
			size = len(files["main.tf"])
		}
		b.ReportMetric(float64(size), "main.tf-bytes")
	})
}
