package ui

import (
	"strings"
	"testing"
)

// TestLegibleLogDiagnostic: an error in terraform's JSON log lines shows
// as terraform's text would show it; lines that are not JSON stay as
// they are.
func TestLegibleLogDiagnostic(t *testing.T) {
	log := "Terraform v1.11.4\n" +
		`{"@level":"info","@message":"terraform_data.boom: Creating...","@module":"terraform.ui","type":"apply_start"}` + "\n" +
		`{"@level":"error","@message":"Error: local-exec provisioner error","@module":"terraform.ui","diagnostic":{"severity":"error","summary":"local-exec provisioner error","detail":"Error running command 'exit 3': exit status 3.","range":{"filename":"main.tf","start":{"line":4,"column":3,"byte":40}},"snippet":{"context":"resource \"terraform_data\" \"boom\"","code":"  provisioner \"local-exec\" {","start_line":4}},"type":"diagnostic"}` + "\n" +
		"{not json}\n"
	want := "Terraform v1.11.4\n" +
		"terraform_data.boom: Creating...\n" +
		"\nError: local-exec provisioner error\n\n  on main.tf line 4, in resource \"terraform_data\" \"boom\":\n  4:   provisioner \"local-exec\" {\n\nError running command 'exit 3': exit status 3.\n\n" +
		"{not json}\n"
	if got := legibleLog(log); got != want {
		t.Fatalf("legibleLog:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(legibleLog(log), `"@level"`) {
		t.Fatal("a JSON line is left as JSON")
	}
}
