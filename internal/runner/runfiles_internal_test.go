package runner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRunFiles: run files land in the job's run files folder, with the
// folder's path put in for FilesDir (in their content and in the
// environment variables that ask for it, not in others); a name that
// leaves the folder is refused and writes nothing.
func TestRunFiles(t *testing.T) {
	dir := t.TempDir()
	j := &jobExec{dir: dir}
	err := j.useVars(context.Background(), []Variable{
		{Key: "aws/default/config", Value: "web_identity_token_file = " + FilesDir + "/aws/default/token\n", Category: CategoryFile},
		{Key: "AWS_CONFIG_FILE", Value: FilesDir + "/aws/default/config", Category: "env", Expand: true},
		{Key: "PLAIN", Value: FilesDir, Category: "env"},
		{Key: "TF_WORKSPACE", Value: "other", Category: "env"},
	})
	if err != nil {
		t.Fatal(err)
	}
	files := filepath.Join(dir, "files")
	b, err := os.ReadFile(filepath.Join(files, "aws", "default", "config"))
	if err != nil || string(b) != "web_identity_token_file = "+files+"/aws/default/token\n" {
		t.Errorf("the config file: %q (%v)", b, err)
	}
	if fi, err := os.Stat(filepath.Join(files, "aws", "default", "config")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the config file's mode: %v (%v)", fi.Mode(), err)
	}
	if want := []string{"AWS_CONFIG_FILE=" + files + "/aws/default/config", "PLAIN=" + FilesDir}; !slices.Equal(j.env, want) {
		t.Errorf("the environment: %q, want %q", j.env, want)
	}
	for _, name := range []string{"../escape", "/etc/escape", "aws/../../escape", ""} {
		if err := j.useVars(context.Background(), []Variable{{Key: name, Value: "x", Category: CategoryFile}}); err == nil {
			t.Errorf("run file %q was written", name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "escape")); !os.IsNotExist(err) {
		t.Errorf("a file outside the run files folder: %v", err)
	}
}
