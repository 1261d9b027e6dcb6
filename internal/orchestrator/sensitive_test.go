package orchestrator

import (
	"reflect"
	"testing"
)

func TestParseInterface(t *testing.T) {
	mi := ParseInterface(map[string][]byte{"main.tf": []byte(`
variable "a" { type = string }
variable "b" {
  default = 1
}
output "plain" { value = 1 }
output "secret" {
  value     = var.a
  sensitive = true
}
output "not_secret" {
  value     = 2
  sensitive = false
}
`)})
	if mi == nil {
		t.Fatal("no interface")
	}
	if want := map[string]bool{"a": false, "b": true}; !reflect.DeepEqual(mi.Variables, want) {
		t.Errorf("variables: %v, want %v", mi.Variables, want)
	}
	if want := []string{"secret"}; !reflect.DeepEqual(mi.SensitiveOutputs, want) {
		t.Errorf("sensitive outputs: %v, want %v", mi.SensitiveOutputs, want)
	}
	if ParseInterface(map[string][]byte{"main.tf": []byte(`variable "a" {`)}) != nil {
		t.Error("code that does not parse has an interface")
	}
}

// A resource's sensitive outputs and the workload outputs that refer to
// them are reported; others are not.
func TestSensitive(t *testing.T) {
	cat := &Catalogue{
		ResourceTypes: []*ResourceType{{ID: "db", OutputSchema: map[string]any{"type": "object"}}},
		Modules: []*Module{{ID: "db", ResourceType: "db", ModuleSourceCode: `
output "host" { value = "h" }
output "password" {
  value     = "p"
  sensitive = true
}
`}},
		Rules: []*ModuleRule{{ModuleID: "db"}},
	}
	m := &Manifest{Workloads: map[string]Workload{"api": {
		Resources: map[string]Request{"db": {Type: "db"}},
		Outputs:   map[string]string{"HOST": "${resources.db.outputs.host}", "URL": "pg://u:${resources.db.outputs.password}@x"},
	}}}
	g, err := Compile(cat, Context{OrgID: "o", ProjectID: "p", EnvID: "dev", EnvTypeID: "development"}, m)
	if err != nil {
		t.Fatal(err)
	}
	got := g.Sensitive(cat)
	want := Sensitivity{
		Resources: map[string][]string{"db.default#workloads.api.db": {"password"}},
		Workloads: map[string][]string{"api": {"URL"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sensitive: %+v, want %+v", got, want)
	}
}
