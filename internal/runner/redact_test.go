package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedactRealPlan plans a configuration with sensitive values using the
// real terraform and checks that no sensitive value survives redaction while
// the plan keeps its shape.
func TestRedactRealPlan(t *testing.T) {
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatal("terraform is not on PATH: this test needs it")
	}
	dir := t.TempDir()
	cfg := `
variable "password" {
  type      = string
  sensitive = true
}
variable "api_key" { type = string }
variable "region" { type = string }
resource "terraform_data" "db" {
  input = { password = var.password, region = var.region }
}
output "password" {
  value     = var.password
  sensitive = true
}
output "region" { value = var.region }
`
	os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644)
	env := append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1")
	runTF := func(args ...string) []byte {
		cmd := exec.Command(tf, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("terraform %v: %v %s", args, err, out)
		}
		return out
	}
	runTF("init", "-input=false")
	runTF("plan", "-input=false", "-out=tfplan", "-var", "password=hunter2-SECRET", "-var", "api_key=key-TOPSECRET", "-var", "region=eu-west-1")
	plan := runTF("show", "-json", "tfplan")
	for _, secret := range []string{"hunter2-SECRET", "key-TOPSECRET"} {
		if !strings.Contains(string(plan), secret) {
			t.Fatalf("the unredacted plan should contain %q (test setup)", secret)
		}
	}
	red := Redact(plan, map[string]bool{"api_key": true}, nil)
	if red == nil {
		t.Fatal("Redact returned nil")
	}
	for _, secret := range []string{"hunter2-SECRET", "key-TOPSECRET"} {
		if strings.Contains(string(red), secret) {
			t.Fatalf("redacted plan still contains %q", secret)
		}
	}
	if !strings.Contains(string(red), "eu-west-1") || !strings.Contains(string(red), `"resource_changes"`) {
		t.Fatal("redaction removed values that are not sensitive")
	}
	a, c, d, i := countChanges(plan)
	if a != 1 || c != 0 || d != 0 || i != 0 {
		t.Fatalf("countChanges = %d %d %d %d, want 1 0 0 0", a, c, d, i)
	}
}

func TestLogWriterMasksAcrossWrites(t *testing.T) {
	api := &fakeLogs{}
	w := newLogWriter(t.Context(), api, "job-1", "plan-1", []string{"s3cr3t-value"})
	w.Write([]byte("password is s3cr3"))
	w.Write([]byte("t-value and more\nnext line s3cr3t-value"))
	w.Close()
	got := api.String()
	if strings.Contains(got, "s3cr3t") || strings.Count(got, "***") != 2 {
		t.Fatalf("log = %q", got)
	}
}

// TestLogWriterRest: the end of a log that Rest hands over (for the report
// to carry) follows what was shipped, masked and whole (a trailing partial
// line included), and is never shipped as well; what is written after
// Rest is shipped by Close.
func TestLogWriterRest(t *testing.T) {
	api := &fakeLogs{}
	w := newLogWriter(t.Context(), api, "job-1", "apply-1", []string{"s3cr3t-value"})
	big := strings.Repeat("a line of terraform output\n", 3000) // over 64 KiB: shipped at once
	w.Write([]byte(big))
	w.Write([]byte("last line s3cr3t-value\nno newline s3cr3"))
	w.Write([]byte("t-value"))
	rest := string(w.Rest())
	if api.String() != big {
		t.Fatalf("shipped %d bytes before Rest, want the %d of the first write", api.Len(), len(big))
	}
	if want := "last line ***\nno newline ***"; rest != want {
		t.Fatalf("Rest = %q, want %q", rest, want)
	}
	if again := w.Rest(); len(again) != 0 {
		t.Fatalf("a second Rest returned %q, want nothing", again)
	}
	w.Write([]byte("after\n"))
	w.Close()
	if got := api.String(); got != big+"after\n" {
		t.Fatalf("after Close the shipped log ends %q, want what was written after Rest", got[max(0, len(got)-20):])
	}
}

type fakeLogs struct {
	API
	strings.Builder
}

func (f *fakeLogs) AppendLog(_ context.Context, _, _ string, data []byte) error {
	f.Write(data)
	return nil
}

func TestWithProviderSchemas(t *testing.T) {
	plan := []byte(`{"format_version":"1.2","resource_changes":[]}`)
	schemas := []byte(`{"format_version":"1.0","provider_schemas":{"registry.terraform.io/hashicorp/null":{"resource_schemas":{"null_resource":{}}}}}`)
	var got map[string]any
	if err := json.Unmarshal(withProviderSchemas(plan, schemas), &got); err != nil {
		t.Fatal(err)
	}
	if got["plan_format_version"] != "1.2" || got["provider_format_version"] != "1.0" {
		t.Fatalf("format versions: %v", got)
	}
	ps, _ := got["provider_schemas"].(map[string]any)
	if _, ok := ps["registry.terraform.io/hashicorp/null"]; !ok {
		t.Fatalf("provider_schemas missing the null provider: %v", got["provider_schemas"])
	}
	if string(withProviderSchemas(plan, []byte("not json"))) != string(plan) {
		t.Fatal("a schema that is not JSON must leave the plan as it was")
	}
}

// TestRedactChangeStandIns: a sensitive value in a change becomes a
// stand-in of its JSON type that is not the value; before and after get
// the same stand-in when equal and different ones when not; null stays
// null, and what is not sensitive stays.
func TestRedactChangeStandIns(t *testing.T) {
	plan := []byte(`{"resource_changes":[{"change":{"actions":["update"],
		"before":{"same":"s3cr3t-a","changed":"s3cr3t-b","num":42,"list":["s3cr3t-c"],"obj":{"k":"s3cr3t-d"},"flag":true,"gone":null,"plain":"p"},
		"after":{"same":"s3cr3t-a","changed":"s3cr3t-e","num":43,"list":["s3cr3t-c"],"obj":{"k":"s3cr3t-f"},"flag":true,"gone":null,"plain":"p"},
		"before_sensitive":{"same":true,"changed":true,"num":true,"list":true,"obj":true,"flag":true,"gone":true},
		"after_sensitive":{"same":true,"changed":true,"num":true,"list":true,"obj":true,"flag":true,"gone":true}}}],
		"output_changes":{"o":{"actions":["create"],"before":null,"after":"s3cr3t-g","before_sensitive":false,"after_sensitive":true}}}`)
	red := Redact(plan, nil, nil)
	if strings.Contains(string(red), "s3cr3t") || strings.Contains(string(red), "42") || strings.Contains(string(red), "43") {
		t.Fatalf("a sensitive value survived: %s", red)
	}
	var p struct {
		ResourceChanges []struct {
			Change struct{ Before, After map[string]any }
		} `json:"resource_changes"`
		OutputChanges map[string]struct{ After any } `json:"output_changes"`
	}
	if err := json.Unmarshal(red, &p); err != nil {
		t.Fatal(err)
	}
	b, a := p.ResourceChanges[0].Change.Before, p.ResourceChanges[0].Change.After
	for _, k := range []string{"same", "list", "flag"} {
		if b[k] == nil || fmt.Sprint(b[k]) != fmt.Sprint(a[k]) {
			t.Errorf("%s: before %v, after %v; want one non-null stand-in", k, b[k], a[k])
		}
	}
	for _, k := range []string{"changed", "num", "obj"} {
		if b[k] == nil || a[k] == nil || fmt.Sprint(b[k]) == fmt.Sprint(a[k]) {
			t.Errorf("%s: before %v, after %v; want two different stand-ins", k, b[k], a[k])
		}
	}
	if _, ok := a["num"].(float64); !ok {
		t.Errorf("num's stand-in %v is not a number", a["num"])
	}
	if _, ok := a["obj"].(map[string]any); !ok {
		t.Errorf("obj's stand-in %v is not an object", a["obj"])
	}
	if a["gone"] != nil || a["plain"] != "p" {
		t.Errorf("gone %v (want null), plain %v (want p)", a["gone"], a["plain"])
	}
	if o := p.OutputChanges["o"].After; o == nil {
		t.Error("a sensitive output's after is null")
	}
}
