package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Engine is a terraform or tofu binary the tests run.
type Engine struct {
	Name    string // "terraform" or "tofu"
	Version string // as the binary reports it, e.g. "1.5.7"
	Path    string
}

// Label names the engine in subtest names: "terraform-1.11.4".
func (e Engine) Label() string { return e.Name + "-" + e.Version }

// RepoRoot is the folder of the repository's go.mod, found from the
// working directory (a test runs in its package's folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// EnginesDir is the engines folder the tests use for the engines beyond the
// terraform on PATH (`make engines` builds them): TERRACE_TEST_ENGINES_DIR,
// else the repository's .cache/engines. Test servers search it for the
// version a workspace names, as `terrace server --engines-dir` does.
func EnginesDir() string {
	if d := os.Getenv("TERRACE_TEST_ENGINES_DIR"); d != "" {
		return d
	}
	root, err := RepoRoot()
	if err != nil {
		return ""
	}
	return filepath.Join(root, ".cache", "engines")
}

// Engines returns every engine the end-to-end scenarios run with: the
// terraform on PATH (a failure when missing), then each engine that
// tools/engines/versions lists, from EnginesDir. A listed engine that is
// not built is a failure when CI is set (CI builds them with `make
// engines`), and is logged and left out elsewhere.
func Engines(t testing.TB) []Engine {
	t.Helper()
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatal("terraform is not on PATH: the end-to-end tests drive the real terraform binary")
	}
	first, err := engineAt("terraform", tf)
	if err != nil {
		t.Fatalf("terraform on PATH: %v", err)
	}
	out := []Engine{first}
	wanted, err := listedEngines()
	if err != nil {
		t.Fatal(err)
	}
	dir := EnginesDir()
	for _, w := range wanted {
		bin := filepath.Join(dir, w.Name, w.Version, w.Name)
		e, err := engineAt(w.Name, bin)
		if err == nil && e.Version != w.Version {
			err = fmt.Errorf("%s reports version %s", bin, e.Version)
		}
		if err != nil {
			msg := fmt.Sprintf("%s %s is not built (%v): run `make engines` (tools/engines/build.sh) to build it from the Go module proxy", w.Name, w.Version, err)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Log("left out: " + msg)
			continue
		}
		out = append(out, e)
	}
	return out
}

// listedEngines reads tools/engines/versions.
func listedEngines() ([]Engine, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(root, "tools", "engines", "versions"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Engine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, version, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("tools/engines/versions: %q is not \"name version\"", line)
		}
		out = append(out, Engine{Name: name, Version: strings.TrimSpace(version)})
	}
	return out, sc.Err()
}

var engineVersions sync.Map // path -> version

// engineAt asks the binary at path for its version.
func engineAt(name, path string) (Engine, error) {
	if v, ok := engineVersions.Load(path); ok {
		return Engine{Name: name, Version: v.(string), Path: path}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "version", "-json")
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=/dev/null")
	raw, err := cmd.Output()
	if err != nil {
		return Engine{}, err
	}
	var doc struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Version == "" {
		return Engine{}, fmt.Errorf("%s version -json printed %q", path, raw)
	}
	v := strings.TrimPrefix(doc.Version, "v")
	engineVersions.Store(path, v)
	return Engine{Name: name, Version: v, Path: path}, nil
}
