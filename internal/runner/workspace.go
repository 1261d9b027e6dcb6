package runner

import (
	"github.com/terracehq/terrace/internal/core"
	"os"
	"path/filepath"
)

// A remote run evaluates terraform.workspace to its workspace's name, as
// HCP Terraform's do (the whole name, a `backend "remote"` prefix
// included): the run selects a local workspace of that name, whose state
// the local backend keeps in terraform.tfstate.d/<name>/terraform.tfstate
// ("default" keeps terraform.tfstate).
//
// The workspace is selected by the data folder's environment file, as
// `terraform workspace select` does, not by TF_WORKSPACE: the cloud
// backend reads TF_WORKSPACE wherever it is configured, so a
// terraform_remote_state data source with backend "cloud" naming another
// workspace would fail on it ("Invalid workspaces configuration").

// defaultWorkspace is terraform's default workspace.
const defaultWorkspace = "default"

// workspaceName is what the runner gives terraform as a workspace name:
// Terrace's workspace names (letters, digits, - and _), which terraform
// takes as they are and which make one folder under terraform.tfstate.d.
var workspaceName = core.NewPattern(`^[A-Za-z0-9_-]+$`, 1, 128)

// terraformWorkspace is the terraform workspace of a run of the named
// Terrace workspace: its name, or "default" for a name terraform could not
// take (none that Terrace allows).
func terraformWorkspace(name string) string {
	if !workspaceName.MatchString(name) {
		return defaultWorkspace
	}
	return name
}

// stateFile is where the local backend keeps the state of workspace ws
// for the configuration in wd.
func stateFile(wd, ws string) string {
	if ws == defaultWorkspace {
		return filepath.Join(wd, "terraform.tfstate")
	}
	return filepath.Join(wd, "terraform.tfstate.d", ws, "terraform.tfstate")
}

// dataDir is terraform's data folder for wd under the environment env
// (the workspace's environment variables): TF_DATA_DIR, else .terraform.
func dataDir(wd string, env []Variable) string {
	dir := ".terraform"
	for _, v := range env {
		if v.Category == "env" && v.Key == "TF_DATA_DIR" && v.Value != "" {
			dir = v.Value
		}
	}
	if filepath.IsAbs(dir) {
		return dir
	}
	return filepath.Join(wd, dir)
}

// selectWorkspace makes ws terraform's current workspace for the
// configuration in wd, whose data folder is data: the workspace exists
// (its state folder; terraform asks to create a missing one) and the
// data folder's environment file names it (replacing one uploaded with
// the configuration). A backend recorded in an uploaded data folder (its
// terraform.tfstate) is the uploader's, not the run's: it is forgotten,
// so that init, which copies states without asking (-force-copy), never
// copies from it over the workspace's.
func selectWorkspace(wd, data, ws string) error {
	if err := os.MkdirAll(filepath.Dir(stateFile(wd, ws)), 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(data, "terraform.tfstate")); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(filepath.Join(data, "environment"), []byte(ws), 0o600)
}
