package run_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestRunListAsksTheWorkspaceDomain: a workspace's run list asks the
// workspace domain whether the caller may see the workspace, not only the
// API's guard. Called directly, as a team of another organization, it
// answers 404 and no runs; as a team with read access, the run. (The
// domain's own check is the organization's, as workspace.Get's; access to
// the workspace within it is the guard's decision, from the authz model.)
func TestRunListAsksTheWorkspaceDomain(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "runlist")
		ws, err := c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "x" {}`)
		r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		team := func(name string) string {
			tm, err := c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			return tm.ID
		}
		readers := team("readers")
		other := testenv.NewOrg(t, c, "runlist-other")
		tm, err := c.Teams.Create(ctx, other.Name, tfe.TeamCreateOptions{Name: tfe.String("outsiders")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: &tfe.Team{ID: readers}, Workspace: ws}); err != nil {
			t.Fatal(err)
		}
		as := func(teamID, org string) context.Context {
			p := &auth.Principal{Kind: auth.KindTeam, TeamID: teamID, Organization: org}
			return authz.WithModel(auth.WithPrincipal(ctx, p), e.Server.Authz)
		}
		runs, total, err := e.Server.Runs.ListPage(as(tm.ID, other.Name), ws.ID, run.ListOptions{Limit: 20})
		if core.KindOf(err) != core.KindNotFound || len(runs) != 0 || total != 0 {
			t.Errorf("a team of another organization listing the workspace's runs: %d runs (total %d), %v; want not found", len(runs), total, err)
		}
		runs, total, err = e.Server.Runs.ListPage(as(readers, org.Name), ws.ID, run.ListOptions{Limit: 20})
		if err != nil || total != 1 || len(runs) != 1 || runs[0].ID != r.ID {
			t.Errorf("a team with read access listing the workspace's runs: %d runs (total %d), %v; want %s", len(runs), total, err, r.ID)
		}
	})
}

// TestCreateAsksTheModel: the run service decides who may start a run,
// whoever calls it, as POST /runs decides (authz.CreateRunAction): called
// directly, a team with plan access starts plan-only runs and no run that
// may apply, a team with read access none; CreateSystem, for runs whose
// domain decided, asks nothing. A run auto-queued by an upload is decided
// for whoever created the configuration version: one that may apply is
// started for a team with write access, and refused (recorded on the
// version) for a team with plan access.
func TestCreateAsksTheModel(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "runcreate")
		ws, err := c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "x" {}`)
		team := func(name string, access tfe.AccessType) string {
			tm, err := c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String(name), Visibility: tfe.String("organization")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(access), Team: tm, Workspace: ws}); err != nil {
				t.Fatal(err)
			}
			return tm.ID
		}
		readers, planners, writers := team("readers", tfe.AccessRead), team("planners", tfe.AccessPlan), team("writers", tfe.AccessWrite)
		as := func(teamID string) context.Context {
			p := &auth.Principal{Kind: auth.KindTeam, TeamID: teamID, Organization: org.Name}
			return authz.WithModel(auth.WithPrincipal(ctx, p), e.Server.Authz)
		}
		yes := true
		applies := run.CreateOptions{WorkspaceID: ws.ID, ConfigurationVersionID: cv.ID}
		plans := run.CreateOptions{WorkspaceID: ws.ID, ConfigurationVersionID: cv.ID, PlanOnly: &yes}
		if _, err := e.Server.Runs.Create(as(planners), applies); core.KindOf(err) != core.KindForbidden {
			t.Errorf("a team with plan access starting a run that may apply: %v, want forbidden", err)
		}
		if _, err := e.Server.Runs.Create(as(readers), plans); core.KindOf(err) != core.KindForbidden {
			t.Errorf("a team with read access starting a plan-only run: %v, want forbidden", err)
		}
		if r, err := e.Server.Runs.Create(as(planners), plans); err != nil || !r.PlanOnly {
			t.Errorf("a team with plan access starting a plan-only run: %+v, %v", r, err)
		}
		if _, err := e.Server.Runs.CreateSystem(as(planners), applies); err != nil {
			t.Errorf("a run the system starts: %v", err)
		}

		// Auto-queued by an upload, as the version's creator.
		upload := func(teamID string) *tfe.ConfigurationVersion {
			t.Helper()
			tok, err := c.TeamTokens.Create(ctx, teamID)
			if err != nil {
				t.Fatal(err)
			}
			tc := e.NewClient(t, tok.Token)
			v, err := tc.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.ConfigurationVersions.UploadTarGzip(ctx, v.UploadURL, bytes.NewReader(archive(t))); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if v, err = c.ConfigurationVersions.Read(ctx, v.ID); err != nil {
					t.Fatal(err)
				}
				if v.Status == tfe.ConfigurationUploaded {
					return v
				}
				if time.Now().After(deadline) {
					t.Fatalf("configuration version %s is %s after 30s", v.ID, v.Status)
				}
			}
		}
		runsOf := func(cvID string) int {
			t.Helper()
			l, err := c.Runs.List(ctx, ws.ID, &tfe.RunListOptions{ListOptions: tfe.ListOptions{PageSize: 100}})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range l.Items {
				if r.ConfigurationVersion != nil && r.ConfigurationVersion.ID == cvID {
					n++
				}
			}
			return n
		}
		if v := upload(writers); v.Error != "" || runsOf(v.ID) != 1 {
			t.Errorf("an upload by a team with write access: error %q %q, %d runs; want its run", v.Error, v.ErrorMessage, runsOf(v.ID))
		}
		if v := upload(planners); v.Error == "" || !strings.Contains(v.ErrorMessage, "insufficient permissions") || runsOf(v.ID) != 0 {
			t.Errorf("an upload by a team with plan access: error %q %q, %d runs; want the refusal and no run", v.Error, v.ErrorMessage, runsOf(v.ID))
		}
	})
}

// archive is a configuration's tar.gz.
func archive(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(`resource "terraform_data" "x" {}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := slug.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCreateRefusesBeforeItTells: POST /runs is decided by the run service
// alone (the guard only locates the workspace), before it tells anything
// of the workspace or of the configuration version asked for, so a
// client is answered as when the guard decided: 404 to a team that cannot
// see the workspace, 403 to one that sees it without the permission the
// run needs, whether the workspace executes locally, the version is not
// uploaded yet or belongs to another workspace. A team with plan access
// is refused a run that may apply and starts one on a speculative
// version; allowed, it is told what is wrong with what it asked.
func TestCreateRefusesBeforeItTells(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "runorder")
		workspace := func(name, mode string) *tfe.Workspace {
			w, err := c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String(name), ExecutionMode: tfe.String(mode)})
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		remote, local, other := workspace("remote", "remote"), workspace("local", "local"), workspace("other", "remote")
		team := func(name string, access tfe.AccessType, on ...*tfe.Workspace) string {
			tm, err := c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String(name), Visibility: tfe.String("organization")})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range on {
				if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(access), Team: tm, Workspace: w}); err != nil {
					t.Fatal(err)
				}
			}
			tok, err := c.TeamTokens.Create(ctx, tm.ID)
			if err != nil {
				t.Fatal(err)
			}
			return tok.Token
		}
		readers, planners, bystanders := team("readers", tfe.AccessRead, remote, local), team("planners", tfe.AccessPlan, remote), team("bystanders", tfe.AccessRead)
		version := func(w *tfe.Workspace, speculative, upload bool) string {
			t.Helper()
			v, err := c.ConfigurationVersions.Create(ctx, w.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false), Speculative: tfe.Bool(speculative)})
			if err != nil {
				t.Fatal(err)
			}
			if !upload {
				return v.ID
			}
			if err := c.ConfigurationVersions.UploadTarGzip(ctx, v.UploadURL, bytes.NewReader(archive(t))); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); v.Status != tfe.ConfigurationUploaded; time.Sleep(50 * time.Millisecond) {
				if v, err = c.ConfigurationVersions.Read(ctx, v.ID); err != nil {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatalf("configuration version %s is %s after 30s", v.ID, v.Status)
				}
			}
			return v.ID
		}
		pending, uploaded, speculative := version(remote, false, false), version(remote, false, true), version(remote, true, true)
		elsewhere, elsewhereSpeculative := version(other, false, true), version(other, true, true)
		body := func(w *tfe.Workspace, cv string, planOnly bool) string {
			rels := `"workspace":{"data":{"type":"workspaces","id":"` + w.ID + `"}}`
			if cv != "" {
				rels += `,"configuration-version":{"data":{"type":"configuration-versions","id":"` + cv + `"}}`
			}
			attrs := ""
			if planOnly {
				attrs = `"plan-only":true`
			}
			return `{"data":{"type":"runs","attributes":{` + attrs + `},"relationships":{` + rels + `}}}`
		}
		for _, c := range []struct {
			what, token, body string
			status            int
			says              string
		}{
			{"a team that cannot see a local workspace", bystanders, body(local, "", false), 404, "not found"},
			{"a team with read on a local workspace", readers, body(local, "", false), 403, "insufficient permissions to apply runs"},
			{"a team that cannot see the workspace, on a pending version", bystanders, body(remote, pending, false), 404, "not found"},
			{"a team with read, on a pending version", readers, body(remote, pending, true), 403, "insufficient permissions to queue plans"},
			{"a team with plan, a run that may apply", planners, body(remote, uploaded, false), 403, "insufficient permissions to apply runs"},
			{"a team with plan, another workspace's version", planners, body(remote, elsewhere, false), 403, "insufficient permissions to apply runs"},
			{"a team with plan, another workspace's speculative version", planners, body(remote, elsewhereSpeculative, false), 404, "not found in workspace"},
			{"a team with plan, a plan-only run on a pending version", planners, body(remote, pending, true), 422, "not uploaded"},
			{"a team with plan, a speculative version", planners, body(remote, speculative, false), 201, `"plan-only":true`},
		} {
			status, got := e.API(t, c.token, "POST", "/api/v2/runs", c.body)
			if status != c.status || !strings.Contains(string(got), c.says) {
				t.Errorf("%s: %d %s; want %d saying %q", c.what, status, got, c.status, c.says)
			}
		}
	})
}
