package runner

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNeedsBackendOverride: the backend override is written whenever the
// root module may have a backend or cloud block (in any file terraform or
// OpenTofu reads, .tf.json included) or was initialised with one, and
// left out when no configuration file names either.
func TestNeedsBackendOverride(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"no backend", map[string]string{"main.tf": `resource "terraform_data" "r" {}`, "vars.auto.tfvars": `region = "cloud-1"`}, false},
		{"backend block", map[string]string{"main.tf": `resource "terraform_data" "r" {}`, "backend.tf": "terraform {\n  backend \"s3\" {}\n}\n"}, true},
		{"cloud block", map[string]string{"main.tf": "terraform {\n  cloud {\n    organization = \"acme\"\n  }\n}\n"}, true},
		{"cloud block in JSON", map[string]string{"main.tf.json": `{"terraform": {"cloud": {"organization": "acme"}}}`}, true},
		{"backend key spelled with an escape in JSON", map[string]string{"main.tf.json": `{"terraform": {"\u0062ackend": {"s3": {}}}}`}, true},
		{"JSON without escapes or the words", map[string]string{"main.tf.json": `{"resource": {"terraform_data": {"r": {}}}}`}, false},
		{"cloud block in an OpenTofu file", map[string]string{"main.tofu": "terraform {\n  cloud {}\n}\n"}, true},
		{"the word in a string", map[string]string{"main.tf": `data "terraform_remote_state" "net" { backend = "remote" }`}, true},
		{"initialised with a backend", map[string]string{"main.tf": `resource "terraform_data" "r" {}`, ".terraform/terraform.tfstate": `{"backend": {"type": "cloud"}}`}, true},
		{"a directory named like a file", map[string]string{"main.tf": `resource "terraform_data" "r" {}`, "modules.tf/backend.tf": `terraform { backend "s3" {} }`}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, text := range c.files {
				p := filepath.Join(dir, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := needsBackendOverride(dir)
			if err != nil || got != c.want {
				t.Fatalf("needsBackendOverride = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
