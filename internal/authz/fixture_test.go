package authz_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	statepkg "github.com/terracehq/terrace/internal/state"
	"github.com/terracehq/terrace/internal/testenv"
)

// world is one organization with every kind of caller the matrix asks
// about, and a resource of every kind the route table locates.
type world struct {
	e      *testenv.Env
	org    *tfe.Organization
	other  *tfe.Organization
	prj    *tfe.Project
	ws     *tfe.Workspace // the workspace the teams are granted on
	runWS  *tfe.Workspace // the workspace of the run token's run
	cv     *tfe.ConfigurationVersion
	run    *tfe.Run
	sv     *tfe.StateVersion
	output string
	tws    string // a team-workspaces grant on ws
	tprj   string // a team-projects grant on prj
	teams  map[string]*tfe.Team
	// A stack in project stackPrj (grants there: team-read read, team-write
	// write, team-admin maintain, team-plan none) with a completed
	// configuration whose deployment run waits for approval, a failed
	// configuration's diagnostic, and a state version of the deployment.
	stackPrj                                    *tfe.Project
	stack, stackCfg, stackGroup, stackRun, step string
	stackDiag, stackSV                          string
	// tokens by principal name.
	tokens map[string]string
}

// Principals of the matrix.
var principals = []string{"site-admin", "owner", "read", "plan", "write", "admin", "member", "other-org-owner",
	"organization-token", "run-token", "expired", "none"}

// must(f())(t) is f's value, or the test's end.
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func userToken(t *testing.T, e *testenv.Env, userID string, exp *time.Time) string {
	_, secret, err := e.Server.Auth.CreateToken(context.Background(), e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: userID, ExpiredAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

func ownersTeam(t *testing.T, c *tfe.Client, org string) *tfe.Team {
	l := must(c.Teams.List(context.Background(), org, nil))(t)
	for _, tm := range l.Items {
		if tm.Name == "owners" {
			return tm
		}
	}
	t.Fatalf("organization %s has no owners team", org)
	return nil
}

func writeConfig(t *testing.T, body string) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startRun uploads a configuration to ws and queues a run on it, without
// waiting for it.
func startRun(t *testing.T, c *tfe.Client, ws *tfe.Workspace, speculative bool) (*tfe.ConfigurationVersion, *tfe.Run) {
	ctx := context.Background()
	cv := must(c.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false), Speculative: tfe.Bool(speculative)}))(t)
	if err := c.ConfigurationVersions.Upload(ctx, cv.UploadURL, writeConfig(t, `resource "terraform_data" "a" { input = "x" }`)); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		cv = must(c.ConfigurationVersions.Read(ctx, cv.ID))(t)
		if cv.Status == tfe.ConfigurationUploaded {
			break
		}
		if i > 200 {
			t.Fatalf("configuration version is %s", cv.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := must(c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv}))(t)
	return cv, r
}

func newWorld(t *testing.T, e *testenv.Env) *world {
	ctx := context.Background()
	c := e.Client
	w := &world{e: e, teams: map[string]*tfe.Team{}, tokens: map[string]string{"site-admin": e.Token}}
	w.org = testenv.NewOrg(t, c, "acme")
	w.other = testenv.NewOrg(t, c, "globex")
	w.prj = must(c.Projects.Create(ctx, w.org.Name, tfe.ProjectCreateOptions{Name: "platform"}))(t)
	w.ws = must(c.Workspaces.Create(ctx, w.org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("app"), Project: w.prj}))(t)
	w.runWS = must(c.Workspaces.Create(ctx, w.org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("builder")}))(t)

	for _, level := range []string{"read", "plan", "write", "admin"} {
		tm := must(c.Teams.Create(ctx, w.org.Name, tfe.TeamCreateOptions{Name: tfe.String("team-" + level), Visibility: tfe.String("organization")}))(t)
		w.teams[level] = tm
		ta := must(c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessType(level)), Team: tm, Workspace: w.ws}))(t)
		if level == "read" {
			w.tws = ta.ID
		}
		w.tokens[level] = must(c.TeamTokens.Create(ctx, tm.ID))(t).Token
	}
	// A grant on the project for a team that is no principal here.
	side := must(c.Teams.Create(ctx, w.org.Name, tfe.TeamCreateOptions{Name: tfe.String("observers")}))(t)
	w.tprj = must(c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessRead, Team: side, Project: w.prj}))(t).ID

	_, owner := e.UserClient(t, w.org.Name, "owner@acme.test", ownersTeam(t, c, w.org.Name))
	w.tokens["owner"] = userToken(t, e, owner.User.ID, nil)
	past := core.Now().Add(-time.Hour)
	w.tokens["expired"] = userToken(t, e, owner.User.ID, &past)
	_, member := e.UserClient(t, w.org.Name, "member@acme.test")
	w.tokens["member"] = userToken(t, e, member.User.ID, nil)
	_, stranger := e.UserClient(t, w.other.Name, "owner@globex.test", ownersTeam(t, c, w.other.Name))
	w.tokens["other-org-owner"] = userToken(t, e, stranger.User.ID, nil)
	w.tokens["organization-token"] = must(c.OrganizationTokens.Create(ctx, w.org.Name))(t).Token

	// A state version with an output in the granted workspace.
	must(c.Workspaces.Lock(ctx, w.ws.ID, tfe.WorkspaceLockOptions{}))(t)
	state := `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l-1","outputs":{"name":{"value":"x","type":"string"}},"resources":[]}`
	w.sv = must(c.StateVersions.Create(ctx, w.ws.ID, tfe.StateVersionCreateOptions{
		Serial: tfe.Int64(1), Lineage: tfe.String("l-1"), MD5: tfe.String(md5hex(state)), State: tfe.String(base64.StdEncoding.EncodeToString([]byte(state))),
	}))(t)
	must(c.Workspaces.Unlock(ctx, w.ws.ID))(t)
	outs := must(c.StateVersions.ListOutputs(ctx, w.sv.ID, nil))(t)
	if len(outs.Items) == 0 {
		t.Fatal("the state version has no outputs")
	}
	w.output = outs.Items[0].ID

	// A run in the granted workspace, and a run elsewhere whose token is
	// the run-token principal (valid while that run is not finished).
	w.cv, w.run = startRun(t, c, w.ws, false)
	_, other := startRun(t, c, w.runWS, false)
	exp := core.Now().Add(time.Hour)
	_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindRun, Subject: other.ID, ExpiredAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	w.tokens["run-token"] = secret
	w.run = must(c.Runs.Read(ctx, w.run.ID))(t)
	w.newStack(t)
	return w
}

// newStack makes the world's stack and its objects.
func (w *world) newStack(t *testing.T) {
	ctx := context.Background()
	c := w.e.Client
	w.stackPrj = must(c.Projects.Create(ctx, w.org.Name, tfe.ProjectCreateOptions{Name: "stacks"}))(t)
	for team, access := range map[string]tfe.TeamProjectAccessType{"read": tfe.TeamProjectAccessRead, "write": tfe.TeamProjectAccessWrite,
		"admin": tfe.TeamProjectAccessMaintain} {
		must(c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: access, Team: w.teams[team], Project: w.stackPrj}))(t)
	}
	st := must(c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "net", Project: w.stackPrj}))(t)
	w.stack = st.ID
	cfg := must(c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/stack", nil))(t)
	w.stackCfg = cfg.ID
	g := must(c.StackDeploymentGroups.ReadByName(ctx, cfg.ID, "dev_default"))(t)
	w.stackGroup = g.ID
	runs := must(c.StackDeploymentRuns.List(ctx, g.ID, nil))(t)
	if len(runs.Items) != 1 {
		t.Fatalf("group dev_default has %d deployment runs, want 1", len(runs.Items))
	}
	w.stackRun = runs.Items[0].ID
	// Wait for the plan: the run then waits for an operator, its plan step
	// exists and the deployment's workspace too.
	for i := 0; ; i++ {
		r := must(c.StackDeploymentRuns.Read(ctx, w.stackRun))(t)
		if r.Status == tfe.DeploymentRunStatusPreDeployingPendingOperator {
			break
		}
		if i > 1200 {
			t.Fatalf("deployment run %s is %s, want pre-deploying-pending-operator", w.stackRun, r.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	steps := must(c.StackDeploymentSteps.List(ctx, w.stackRun, nil))(t)
	if len(steps.Items) == 0 {
		t.Fatal("the waiting deployment run has no step")
	}
	w.step = steps.Items[0].ID
	bad := must(c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/stack-broken", nil))(t)
	diags := must(c.StackConfigurations.Diagnostics(ctx, bad.ID))(t)
	if len(diags.Items) == 0 {
		t.Fatal("the broken stack configuration has no diagnostic")
	}
	w.stackDiag = diags.Items[0].ID
	// A state version of the deployment's workspace is a stack state. The
	// workspace is the stack's, which people only read: the version is
	// written by the server itself (no authorization model in its
	// context), as the stack's runs would.
	ws := must(c.Workspaces.Read(ctx, w.org.Name, "stack-"+st.ID+"-dev"))(t)
	me := must(c.Users.ReadCurrent(ctx))(t)
	server := auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, UserID: me.ID, Username: me.Username, SiteAdmin: true})
	must(w.e.Server.Workspaces.Lock(server, ws.ID, "a stack state for the route matrix"))(t)
	state := `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l-2","outputs":{},"resources":[]}`
	serial, lineage, sum := int64(1), "l-2", md5hex(state)
	w.stackSV = must(w.e.Server.States.Create(server, ws.ID, statepkg.CreateOptions{Serial: &serial, Lineage: &lineage, MD5: &sum, State: []byte(state)}))(t).ID
	must(w.e.Server.Workspaces.Unlock(server, ws.ID, false))(t)
}
