package trigger

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/terracehq/terrace/internal/slug"
)

func pack(t *testing.T, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := slug.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func source(name, ws string) string {
	return fmt.Sprintf(`data "terraform_remote_state" %q {
  backend = "remote"
  config = {
    organization = "acme"
    workspaces   = { name = %q }
  }
}
`, name, ws)
}

func TestOutputsRead(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		files map[string]string
		all   bool
		want  []string
	}{
		{"attribute and index", map[string]string{"main.tf": source("n", "net") + `
resource "terraform_data" "a" { input = data.terraform_remote_state.n.outputs.cidr }
locals { x = "${data.terraform_remote_state.n.outputs["tag"]}-y" }
`}, false, []string{"cidr", "tag"}},
		{"another workspace's outputs are not this one's", map[string]string{"main.tf": source("n", "net") + source("o", "other") + `
resource "terraform_data" "a" { input = data.terraform_remote_state.n.outputs.cidr }
resource "terraform_data" "b" { input = data.terraform_remote_state.o.outputs.tag }
`}, false, []string{"cidr"}},
		{"the whole outputs object", map[string]string{"main.tf": source("n", "net") + `
output "all" { value = data.terraform_remote_state.n.outputs }
`}, true, nil},
		{"a workspace name from a variable", map[string]string{"main.tf": `variable "w" { type = string }
data "terraform_remote_state" "n" {
  backend = "remote"
  config  = { organization = "acme", workspaces = { name = var.w } }
}
resource "terraform_data" "a" { input = data.terraform_remote_state.n.outputs.cidr }
`}, false, []string{"cidr"}},
		{"no data source names it (tfe_outputs, …)", map[string]string{"main.tf": `resource "terraform_data" "a" {}`}, true, nil},
		{"a module reads it", map[string]string{"main.tf": `module "m" { source = "./m" }`, "m/m.tf": source("n", "net") + `
resource "terraform_data" "a" { input = data.terraform_remote_state.n.outputs.cidr }
`}, false, []string{"cidr"}},
		{"JSON configuration", map[string]string{"main.tf.json": `{}`, "main.tf": source("n", "net")}, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := outputsRead(pack(t, c.files), "acme", "net")
			var names []string
			for n := range got.names {
				names = append(names, n)
			}
			slices.Sort(names)
			if got.all != c.all || (!c.all && !slices.Equal(names, c.want)) {
				t.Fatalf("outputsRead = all %v %v, want all %v %v", got.all, names, c.all, c.want)
			}
		})
	}
}
