package orchestrator

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/testprovider"
)

// tfEnv prepares a CLI config that installs hashicorp/null from Terrace's
// offline stand-in, and returns the environment to run terraform with.
func tfEnv(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Skip("terraform is not on PATH")
	}
	cfg := filepath.Join(t.TempDir(), "terraformrc")
	if err := os.WriteFile(cfg, []byte(testprovider.Install(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "TF_CLI_CONFIG_FILE="+cfg, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_VAR_NULL_TOKEN=x")
}

func terraform(t *testing.T, env []string, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("terraform", append([]string{"-chdir=" + dir}, args...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		files, _ := os.ReadFile(filepath.Join(dir, "main.tf"))
		t.Fatalf("terraform %s: %v\n%s\nmain.tf:\n%s", strings.Join(args, " "), err, out, files)
	}
	return string(out)
}

// writeCase compiles a case and writes its Terraform into a new directory.
func writeCase(t *testing.T, name string, remoteOK bool) (dir string, ok bool) {
	t.Helper()
	c := loadCase(t, name)
	g, err := Compile(&c.Catalogue, c.Context, &c.Manifest)
	if err != nil {
		return "", false
	}
	for _, n := range g.Nodes {
		if n.Module != nil && n.Module.ModuleSourceCode == "" && !remoteOK {
			return "", false // remote sources cannot be fetched here
		}
	}
	dir = t.TempDir()
	if err := g.WriteTerraform(dir); err != nil {
		t.Fatal(err)
	}
	return dir, true
}

// TestTerraformValidate runs the real terraform init and validate on the
// configuration of every golden case that compiles and uses inline modules.
func TestTerraformValidate(t *testing.T) {
	env := tfEnv(t)
	cases, _ := filepath.Glob(filepath.Join("testdata", "cases", "*.json"))
	validated := 0
	for _, p := range cases {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		dir, ok := writeCase(t, name, false)
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			terraform(t, env, dir, "init", "-input=false", "-no-color")
			out := terraform(t, env, dir, "validate", "-no-color")
			if !strings.Contains(out, "The configuration is valid") {
				t.Fatalf("validate: %s", out)
			}
		})
		validated++
	}
	if validated < 10 {
		t.Fatalf("only %d cases validated; expected the seed graphs, placeholders and providers", validated)
	}
}

// TestTerraformApply applies two configurations with terraform and checks
// the values placeholders produce at run time: bare placeholders keep their
// type, interpolated ones embed strings as is and JSON-encode the rest.
func TestTerraformApply(t *testing.T) {
	env := tfEnv(t)
	apply := func(t *testing.T, name string) map[string]any {
		dir, ok := writeCase(t, name, false)
		if !ok {
			t.Fatalf("%s does not compile", name)
		}
		terraform(t, env, dir, "init", "-input=false", "-no-color")
		terraform(t, env, dir, "apply", "-input=false", "-no-color", "-auto-approve")
		var outs map[string]struct {
			Value any `json:"value"`
		}
		if err := json.Unmarshal([]byte(terraform(t, env, dir, "output", "-json")), &outs); err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		for k, v := range outs {
			m[k] = v.Value
		}
		return m
	}
	t.Run("placeholders", func(t *testing.T) {
		outs := apply(t, "placeholders")
		res := outs["resources"].(map[string]any)
		in := res["app.default#workloads.web.app"].(map[string]any)["inputs"].(map[string]any)
		want := map[string]any{
			"port":      5433.0, // bare: a number stays a number
			"host":      "dev.internal",
			"url":       "postgres://dev.internal:5433/workloads.web.app",
			"conn":      map[string]any{"user": "d"},
			"conn_text": `conn={"user":"d"}`,
			"anything":  "value: [2]",
			"ctx":       "dev",
			"where":     "acme/shop/development app.default",
			"literal":   "keep ${this} and %{that}",
			"policies":  []any{"arn:policy", "arn:policy"},
			"nums":      []any{1.0, 2.5, true, nil, map[string]any{"nested": 5433.0}},
		}
		for k, w := range want {
			g, _ := json.Marshal(in[k])
			wj, _ := json.Marshal(w)
			if string(g) != string(wj) {
				t.Errorf("input %s = %s, want %s", k, g, wj)
			}
		}
		wl := outs["workloads"].(map[string]any)
		if got := wl["web"].(map[string]any)["URL"]; got != "https://www.example.com/dev" {
			t.Errorf("web URL = %v", got)
		}
		if got := wl["worker"].(map[string]any)["HOSTNAME"]; got != "www.example.com" {
			t.Errorf("worker HOSTNAME = %v", got)
		}
	})
	t.Run("providers", func(t *testing.T) {
		outs := apply(t, "providers")
		wl := outs["workloads"].(map[string]any)
		api, cron := wl["api"].(map[string]any), wl["cron"].(map[string]any)
		if b, _ := api["BUCKET"].(string); !strings.HasPrefix(b, "dev-files-") || cron["BUCKET"] != b {
			t.Errorf("shared bucket: api %v, cron %v", api["BUCKET"], cron["BUCKET"])
		}
		if q, _ := api["QUEUE"].(string); !strings.HasPrefix(q, "queue://dev-workloads.api.jobs-") {
			t.Errorf("queue = %v", api["QUEUE"])
		}
	})
}

// TestTerraformFmt checks that the generated root module of every case that
// compiles is already in terraform fmt's layout.
func TestTerraformFmt(t *testing.T) {
	env := tfEnv(t)
	cases, _ := filepath.Glob(filepath.Join("testdata", "cases", "*.json"))
	for _, p := range cases {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		if dir, ok := writeCase(t, name, true); ok {
			t.Run(name, func(t *testing.T) {
				terraform(t, env, dir, "fmt", "-check", "-diff", "-no-color") // the root module only: inline modules are the user's code
			})
		}
	}
}
