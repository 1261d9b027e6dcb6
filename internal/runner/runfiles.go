package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Run files are what the server makes for a run beside its variables: the
// web identity token and shared config file of a cloud provider's dynamic
// credentials (internal/dyncreds). A Variable of category CategoryFile is
// one: Key is its name in the job's run files folder (slash-separated,
// inside it), Value its content. FilesDir, in a run file's content or in
// the value of an environment variable with Expand, stands for that
// folder's absolute path, which only the runner knows. The files go with
// the job's folder when the job ends.
const (
	CategoryFile = "file"
	FilesDir     = "${TERRACE_RUN_FILES}"
)

// filesDir is the job's run files folder.
func (j *jobExec) filesDir() string { return filepath.Join(j.dir, "files") }

// expand puts the run files folder in for FilesDir.
func (j *jobExec) expand(s string) string { return strings.ReplaceAll(s, FilesDir, j.filesDir()) }

// useVars writes vars' run files (again, for an auto-apply's: the apply's
// replace the plan's), makes their Vault logins (CategoryVaultLogin) and
// adds their environment variables to the job's environment, where the
// last of a name wins.
func (j *jobExec) useVars(ctx context.Context, vars []Variable) error {
	for _, v := range vars {
		switch v.Category {
		case CategoryFile:
			if err := j.writeRunFile(v); err != nil {
				return err
			}
		case CategoryVaultLogin:
			// After its token's file (dyncreds puts it first).
			if err := j.vaultLogin(ctx, v); err != nil {
				return err
			}
		case CategoryVaultRead:
			// After the login whose token it reads with.
			if err := j.vaultRead(ctx, v); err != nil {
				return err
			}
		case "env":
			// TF_WORKSPACE would select another workspace than the run's,
			// whose state the runner neither fills nor collects.
			if v.Key == "TF_WORKSPACE" {
				continue
			}
			val := v.Value
			if v.Expand {
				val = j.expand(val)
			}
			j.env = append(j.env, v.Key+"="+val)
		}
	}
	return nil
}

func (j *jobExec) writeRunFile(v Variable) error {
	if !filepath.IsLocal(filepath.FromSlash(v.Key)) {
		return fmt.Errorf("run file %q: not a name inside the run files folder", v.Key)
	}
	path := filepath.Join(j.filesDir(), filepath.FromSlash(v.Key))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing run file %s: %w", v.Key, err)
	}
	if err := os.WriteFile(path, []byte(j.expand(v.Value)), 0o600); err != nil {
		return fmt.Errorf("writing run file %s: %w", v.Key, err)
	}
	return nil
}
