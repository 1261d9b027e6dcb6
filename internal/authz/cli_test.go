package authz_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// terraform runs the real terraform CLI in dir with token as the host's
// credentials.
func terraform(t *testing.T, e *testenv.Env, token, dir string, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatal("terraform is not on PATH: this test drives the real terraform binary")
	}
	home := t.TempDir()
	rc := filepath.Join(home, "terraform.rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", e.Host, token)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "SSL_CERT_FILE="+e.CAFile, "TF_IN_AUTOMATION=1",
		"CHECKPOINT_DISABLE=1", "TF_INPUT=0", "HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// TestTeamAccessWithTerraform: what terraform is told (the workspace's
// permissions) is what the server enforces, for teams with plan and read
// access, through the real CLI.
func TestTeamAccessWithTerraform(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme")
		ws := must(c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("app")}))(t)
		tokens := map[string]string{}
		for _, level := range []string{"plan", "read"} {
			tm := must(c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("team-" + level)}))(t)
			must(c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessType(level)), Team: tm, Workspace: ws}))(t)
			tokens[level] = must(c.TeamTokens.Create(ctx, tm.ID))(t).Token
		}
		dir := writeConfig(t, fmt.Sprintf(`terraform {
  cloud {
    hostname     = %q
    organization = %q
    workspaces { name = "app" }
  }
}
resource "terraform_data" "a" { input = "x" }
`, e.Host, org.Name))

		if out, err := terraform(t, e, tokens["plan"], dir, "init"); err != nil {
			t.Fatalf("init with plan access: %v\n%s", err, out)
		}
		out, err := terraform(t, e, tokens["plan"], dir, "plan")
		if err != nil || !strings.Contains(out, "1 to add") {
			t.Fatalf("plan with plan access: %v\n%s", err, out)
		}
		out, err = terraform(t, e, tokens["plan"], dir, "apply", "-auto-approve")
		if err == nil || !strings.Contains(out, "Insufficient rights to apply changes") {
			t.Fatalf("apply with plan access was not refused as HCP Terraform refuses it: %v\n%s", err, out)
		}
		out, err = terraform(t, e, tokens["read"], dir, "plan")
		if err == nil || !strings.Contains(out, "Insufficient rights to generate a plan") {
			t.Fatalf("plan with read access was not refused: %v\n%s", err, out)
		}
		// The server refuses what the CLI was told it may not do, for a
		// client that does not ask first.
		plan := e.NewClient(t, tokens["plan"])
		cv := must(plan.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)}))(t)
		if _, err := plan.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv}); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("a plan-access team created a run that may apply: %v", err)
		}
		if _, err := e.NewClient(t, tokens["read"]).ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("a read-access team uploaded a configuration: %v", err)
		}
		if got := must(c.Runs.List(ctx, ws.ID, nil))(t); got == nil {
			t.Fatal("no runs")
		}
	})
}

// TestRunTokenOverHTTP: the token a run's terraform can read acts only on
// that run's workspace and on workspaces that share their state with it.
func TestRunTokenOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme")
		a := must(c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("a")}))(t)
		shared := must(c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("shared")}))(t)
		private := must(c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("private")}))(t)
		if err := c.Workspaces.AddRemoteStateConsumers(ctx, shared.ID, tfe.WorkspaceAddRemoteStateConsumersOptions{Workspaces: []*tfe.Workspace{a}}); err != nil {
			t.Fatal(err)
		}
		for _, w := range []*tfe.Workspace{shared, private} {
			must(c.Workspaces.Lock(ctx, w.ID, tfe.WorkspaceLockOptions{}))(t)
			state := `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l-` + w.Name + `","outputs":{"secret":{"value":"` + w.Name + `","type":"string"}},"resources":[]}`
			must(c.StateVersions.Create(ctx, w.ID, tfe.StateVersionCreateOptions{Serial: tfe.Int64(1), Lineage: tfe.String("l-" + w.Name),
				MD5: tfe.String(md5hex(state)), State: tfe.String(b64(state))}))(t)
			must(c.Workspaces.Unlock(ctx, w.ID))(t)
		}
		must(c.Variables.Create(ctx, a.ID, tfe.VariableCreateOptions{Key: tfe.String("k"), Value: tfe.String("v"), Category: tfe.Category(tfe.CategoryTerraform)}))(t)
		_, run := startRun(t, c, a, false)
		exp := core.Now().Add(time.Hour)
		_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindRun, Subject: run.ID, ExpiredAt: &exp})
		if err != nil {
			t.Fatal(err)
		}
		rt := e.NewClient(t, secret)

		if _, err := rt.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: a}); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("a run token created a run: %v", err)
		}
		if _, err := rt.Variables.List(ctx, a.ID, nil); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("a run token read its workspace's variables: %v", err)
		}
		if _, err := rt.StateVersions.ReadCurrent(ctx, private.ID); err == nil || err != tfe.ErrResourceNotFound {
			t.Errorf("a run token read the state of a workspace that does not share it: %v", err)
		}
		if _, err := rt.Workspaces.Read(ctx, org.Name, private.Name); err != tfe.ErrResourceNotFound {
			t.Errorf("a run token saw a workspace that does not share with it: %v", err)
		}
		sv, err := rt.StateVersions.ReadCurrent(ctx, shared.ID)
		if err != nil {
			t.Fatalf("a run token could not read the state shared with it: %v", err)
		}
		req, err := http.NewRequest("GET", sv.DownloadURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := e.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("downloading the shared state: %d", resp.StatusCode)
		}
		// Once the run is over its token is worth nothing.
		for i := 0; ; i++ {
			r := must(c.Runs.Read(ctx, run.ID))(t)
			if r.Status == tfe.RunPlanned {
				break
			}
			if i > 1200 {
				t.Fatalf("run is %s", r.Status)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := c.Runs.Discard(ctx, run.ID, tfe.RunDiscardOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.Workspaces.ReadByID(ctx, a.ID); err != tfe.ErrUnauthorized {
			t.Fatalf("the token of a discarded run: %v", err)
		}
	})
}
