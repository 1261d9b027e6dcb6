package orchestrator

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestDiff(t *testing.T) {
	c := loadCase(t, "placeholders")
	g1, err := Compile(&c.Catalogue, c.Context, &c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	// the state survives storage as JSON
	raw, _ := json.Marshal(g1.State())
	var stored []NodeState
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	if d := Diff(stored, g1.State()); len(d) != 0 {
		t.Fatalf("same graph differs: %+v", d)
	}
	// drop the worker workload, change the dns zone, and move the db to the generic module
	delete(c.Manifest.Workloads, "worker")
	dns := c.Manifest.Shared["dns"]
	dns.Params = map[string]any{"zone": "other.example.com"}
	c.Manifest.Shared["dns"] = dns
	ctx := c.Context
	ctx.EnvTypeID = "staging"
	g2, err := Compile(&c.Catalogue, ctx, &c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ch := range Diff(stored, g2.State()) {
		got[ch.Resource.String()] = ch.Type
	}
	want := map[string]string{
		"workload.default#worker":            ChangeRemoved,
		"dns.default#shared.dns":             ChangeParamsChanged,
		"postgres.default#workloads.web.app": ChangeModuleChanged,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("diff %v, want %v", got, want)
	}
	if d := Diff(nil, g2.State()); len(d) != len(g2.Nodes) || d[0].Type != ChangeAdded {
		t.Fatalf("diff from nothing: %+v", d)
	}
}
