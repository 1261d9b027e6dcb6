package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestRelativeFolders: a server started with relative folders, as `make
// run` starts one (--data-dir .terrace), runs terraform in job folders
// elsewhere. A run that reads another workspace's outputs through
// terraform_remote_state must trust the server's CA (SSL_CERT_FILE) and
// find the run's credentials (its CLI config in the job folder), and an
// engine from a relative engines folder must start. Each of these named a
// file relative to the job's folder before, and the run failed.
func TestRelativeFolders(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engs := engines(t) // before the working folder changes: found from the repository
	enginesDir := testenv.EnginesDir()
	dir := t.TempDir()
	t.Chdir(dir) // not parallel: the working folder is the process's
	for _, d := range []string{"scratch", "plugins"} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(enginesDir, "engines"); err != nil {
		t.Fatal(err)
	}
	e := testenv.New(t, testenv.Options{DataDir: "data", Configure: func(c *server.Config) {
		c.EnginesDir, c.ScratchDir, c.PluginCacheDir = "engines", "scratch", "plugins"
	}})
	if !filepath.IsAbs(e.CAFile) || !strings.HasPrefix(e.CAFile, dir) {
		t.Errorf("the CA file is %q, want it absolute, in %s", e.CAFile, dir)
	}
	ctx := context.Background()
	c := e.Client
	testenv.NewOrg(t, c, "acme")
	applied(ctx, t, c, tfe.WorkspaceCreateOptions{Name: tfe.String("net"), GlobalRemoteState: tfe.Bool(true)}, netConfig)
	// The consumer on an engine from the (relative) engines folder when one
	// is built; the terraform on PATH otherwise.
	app := tfe.WorkspaceCreateOptions{Name: tfe.String("app")}
	version := ""
	if len(engs) > 1 {
		version = engs[1].Version
		if engs[1].Name == "tofu" {
			version = "tofu:" + version
		}
		app.TerraformVersion = tfe.String(version)
	}
	r := applied(ctx, t, c, app, netConsumer(e.Host))
	sv, err := c.StateVersions.ReadCurrentWithOptions(ctx, r.Workspace.ID, &tfe.StateVersionCurrentOptions{Include: []tfe.StateVersionIncludeOpt{tfe.SVoutputs}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sv.Outputs) != 1 || sv.Outputs[0].Value != "10.0.0.0/16" {
		t.Fatalf("app's outputs: %+v, want cidr 10.0.0.0/16 read from net", sv.Outputs)
	}
	if version != "" && sv.TerraformVersion != engs[1].Version {
		t.Errorf("app's state was written by %s, want %s from the engines folder", sv.TerraformVersion, engs[1].Version)
	}
}

// TestAgentRelativeCAFile: `terrace agent --ca-file` relative to where
// the agent starts (the README's own example is `--ca-file ca.pem`). The
// agent's job gives terraform the CA, which runs in the job's folder: a
// run on the agent reading another workspace's outputs through
// terraform_remote_state must trust the server.
func TestAgentRelativeCAFile(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	t.Parallel()
	p := startProc(t, t.TempDir(), "", "")
	ctx := mustCtx()
	c := p.Client
	pool, tok := acmeAgentPool(ctx, t, c)
	applied(ctx, t, c, tfe.WorkspaceCreateOptions{Name: tfe.String("net"), GlobalRemoteState: tfe.Bool(true)}, netConfig)
	// The agent starts in the server's data folder and names the CA from
	// there, as an operator who copied ca.pem beside it would.
	testenv.StartAgentIn(t, p.DataDir, p.Process, tok.Token, "relative", "--ca-file", filepath.Join("tls", "ca.pem"))
	applied(ctx, t, c, tfe.WorkspaceCreateOptions{Name: tfe.String("app"), ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID)},
		netConsumer(strings.TrimPrefix(p.URL, "https://")))
}

// netConsumer is a configuration that outputs net's cidr, read through
// terraform_remote_state from the server at host.
func netConsumer(host string) string {
	return remoteState(host, "net") + `
output "cidr" { value = data.terraform_remote_state.net.outputs.cidr }
`
}

// applied creates a workspace of organization acme with opts, uploads
// config and applies it with a run, and fails the test unless the run
// ends applied.
func applied(ctx context.Context, t *testing.T, c *tfe.Client, opts tfe.WorkspaceCreateOptions, config string) *tfe.Run {
	t.Helper()
	ws, err := c.Workspaces.Create(ctx, "acme", opts)
	if err != nil {
		t.Fatal(err)
	}
	r := createRun(ctx, t, c, ws.ID, uploadConfig(ctx, t, c, ws.ID, config).ID, nil)
	if r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
		t.Fatalf("the run of %s is %s: %s", ws.Name, r.Status, erroredReason(ctx, t, c, r.ID))
	}
	return r
}
