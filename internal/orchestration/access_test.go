package orchestration_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/runtask"
	"github.com/terracehq/terrace/internal/testenv"
)

// orchWorld is an organization with an orchestrator environment and
// callers of every kind, as the permissions tests need them.
type orchWorld struct {
	t     *testing.T
	e     *testenv.Env
	admin apiClient
	// defaultPrj is the project environments' workspaces go into.
	defaultPrj *tfe.Project
}

const (
	orgPath   = "/orgs/acme"
	secretOut = "s3cret-pw"
)

func newOrchWorld(t *testing.T, e *testenv.Env) *orchWorld {
	ctx := context.Background()
	testenv.NewOrg(t, e.Client, "acme")
	w := &orchWorld{t: t, e: e, admin: apiClient{t: t, e: e, token: e.Token}}
	prjs, err := e.Client.Projects.List(ctx, "acme", &tfe.ProjectListOptions{Name: "Default Project"})
	if err != nil || len(prjs.Items) != 1 {
		t.Fatalf("the default project: %v %v", prjs, err)
	}
	w.defaultPrj = prjs.Items[0]
	a := w.admin
	a.must(201, "POST", orgPath+"/env-types", map[string]any{"id": "development"})
	a.must(201, "POST", orgPath+"/projects", map[string]any{"id": "my-project"})
	for _, env := range []string{"dev", "qa"} {
		a.must(201, "POST", orgPath+"/projects/my-project/envs", map[string]any{"id": env, "env_type_id": "development"})
	}
	a.must(201, "POST", orgPath+"/resource-types", map[string]any{"id": "db", "output_schema": map[string]any{"type": "object"}})
	a.must(201, "POST", orgPath+"/modules", map[string]any{"id": "db", "resource_type": "db",
		"module_source_code": "resource \"terraform_data\" \"db\" { input = \"x\" }\noutput \"host\" { value = \"db.internal\" }\n" +
			"output \"password\" {\n  value     = \"" + secretOut + "\"\n  sensitive = true\n}\n"})
	a.must(201, "POST", orgPath+"/module-rules", map[string]any{"module_id": "db"})
	return w
}

func deployBody(env, mode string) map[string]any {
	b := map[string]any{"project_id": "my-project", "env_id": env, "mode": mode}
	if mode != "destroy" {
		b["manifest"] = map[string]any{"shared": map[string]any{"main": map[string]any{"type": "db"}}}
	}
	return b
}

// user returns a client with a user token of a new member of acme in the
// teams.
func (w *orchWorld) user(email string, teams ...*tfe.Team) apiClient {
	_, m := w.e.UserClient(w.t, "acme", email, teams...)
	_, secret, err := w.e.Server.Auth.CreateToken(context.Background(), w.e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
	if err != nil {
		w.t.Fatal(err)
	}
	return apiClient{t: w.t, e: w.e, token: secret}
}

func (w *orchWorld) team(name string) *tfe.Team {
	tm, err := w.e.Client.Teams.Create(context.Background(), "acme", tfe.TeamCreateOptions{Name: tfe.String(name), Visibility: tfe.String("organization")})
	if err != nil {
		w.t.Fatal(err)
	}
	return tm
}

// runToken is the token of a run that waits for confirmation (a run token
// works while its run goes on).
func (w *orchWorld) runToken(r *tfe.Run) string {
	testenv.WaitRun(context.Background(), w.t, w.e.Client, r.ID, tfe.RunPlanned)
	exp := core.Now().Add(time.Hour)
	_, secret, err := w.e.Server.Auth.CreateToken(context.Background(), w.e.Server.DB, auth.NewToken{Kind: auth.KindRun, Subject: r.ID, ExpiredAt: &exp})
	if err != nil {
		w.t.Fatal(err)
	}
	return secret
}

// taskResultToken is the access token a run task service gets for a
// run's pre-plan stage (the service never answers, so it stays valid).
func (w *orchWorld) taskResultToken(ws *tfe.Workspace) string {
	ctx := context.Background()
	got := make(chan string, 1)
	svc := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p runtask.Payload
		if json.Unmarshal(body, &p) == nil && p.AccessToken != "" && p.AccessToken != runtask.TestToken {
			select {
			case got <- p.AccessToken:
			default:
			}
		}
		rw.WriteHeader(http.StatusOK)
	}))
	w.t.Cleanup(svc.Close)
	task, err := w.e.Client.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "scan", URL: svc.URL, Category: "task"})
	if err != nil {
		w.t.Fatal(err)
	}
	stages := []tfe.Stage{tfe.PrePlan}
	if _, err := w.e.Client.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: tfe.Mandatory, Stages: &stages, RunTask: task}); err != nil {
		w.t.Fatal(err)
	}
	cv := testenv.UploadConfig(ctx, w.t, w.e.Client, ws.ID, `resource "terraform_data" "a" {}`)
	if _, err := w.e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv}); err != nil {
		w.t.Fatal(err)
	}
	select {
	case tok := <-got:
		return tok
	case <-time.After(2 * time.Minute):
		w.t.Fatal("the run task service never got a request")
	}
	return ""
}

// waitDeployment waits for a deployment to end and returns it.
func (w *orchWorld) waitDeployment(id string) map[string]any {
	w.t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		d := w.admin.must(200, "GET", orgPath+"/deployments/"+id, nil)
		if d["status"] != "executing" {
			return d
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("deployment %s never ended: %v", id, d)
		}
	}
}

// deployments counts an environment's deployments.
func (w *orchWorld) deployments(env string) int {
	return len(w.admin.must(200, "GET", orgPath+"/projects/my-project/envs/"+env+"/deployments", nil)["list"].([]any))
}

// grantedWorld is an orchWorld whose environment my-project/dev was
// deployed by a team with write access to the default project's
// workspaces, with callers of each kind of access to its workspace.
type grantedWorld struct {
	*orchWorld
	ws    *tfe.Workspace // the environment's workspace
	depID string         // its first deployment
	// deployer (maintain on the default project: it creates workspaces there), planner,
	// reader and outputReader (plan, read and read-outputs access to ws),
	// member (none) and org (the organization token).
	deployer, planner, reader, outputReader, member, org apiClient
}

func newGrantedWorld(t *testing.T, e *testenv.Env) *grantedWorld {
	ctx := context.Background()
	w := &grantedWorld{orchWorld: newOrchWorld(t, e)}
	deployers := w.team("deployers")
	if _, err := e.Client.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessMaintain, Team: deployers, Project: w.defaultPrj}); err != nil {
		t.Fatal(err)
	}
	w.deployer = w.user("deployer@acme.test", deployers)
	w.member = w.user("member@acme.test")
	orgTok, err := e.Client.OrganizationTokens.Create(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	w.org = apiClient{t: t, e: e, token: orgTok.Token}

	// The deployer creates the environment's workspace and applies.
	first := w.deployer.must(202, "POST", orgPath+"/deployments", deployBody("dev", "deploy"))
	w.depID = first["id"].(string)
	d := w.waitDeployment(w.depID)
	if d["status"] != "succeeded" {
		t.Fatalf("the deployer's deployment: %v", d)
	}
	if r, err := e.Client.Runs.Read(ctx, d["run_id"].(string)); err != nil || r.Status != tfe.RunApplied {
		t.Fatalf("the deployment's run: %v %v", r, err)
	}
	if w.ws, err = e.Client.Workspaces.Read(ctx, "acme", "my-project-dev"); err != nil {
		t.Fatal(err)
	}
	if w.ws.Project == nil || w.ws.Project.ID != w.defaultPrj.ID {
		t.Fatalf("the environment's workspace is in project %v, want the default project", w.ws.Project)
	}

	planners, readers, outputReaders := w.team("planners"), w.team("readers"), w.team("output-readers")
	for _, g := range []tfe.TeamAccessAddOptions{
		{Access: tfe.Access(tfe.AccessPlan), Team: planners, Workspace: w.ws},
		{Access: tfe.Access(tfe.AccessRead), Team: readers, Workspace: w.ws},
		{Access: tfe.Access(tfe.AccessCustom), Team: outputReaders, Workspace: w.ws, Runs: tfe.RunsPermission(tfe.RunsPermissionRead),
			StateVersions: tfe.StateVersionsPermission(tfe.StateVersionsPermissionReadOutputs)},
	} {
		if _, err := e.Client.TeamAccess.Add(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	w.planner, w.reader, w.outputReader = w.user("planner@acme.test", planners), w.user("reader@acme.test", readers), w.user("outputs@acme.test", outputReaders)
	// As /api/v2 says: the member may not see the workspace.
	if st, _ := e.API(t, w.member.token, "GET", "/api/v2/workspaces/"+w.ws.ID, nil); st != 404 {
		t.Fatalf("the member reads the workspace through /api/v2: %d", st)
	}
	return w
}

// TestDeployPermissions: deploying needs, on the environment's workspace,
// what /api/v2 needs for the same run (plan for plan_only, apply for
// deploy, rollback and destroy; organization tokens neither), and a first
// deployment what creating the workspace in its project needs.
func TestDeployPermissions(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		w := newGrantedWorld(t, e)

		// Environment qa has no workspace yet: its first deployment needs
		// what creating one in the default project needs, and an
		// organization token, which may create workspaces, never runs
		// terraform.
		for _, mode := range []string{"deploy", "plan_only", "destroy"} {
			w.member.must(403, "POST", orgPath+"/deployments", deployBody("qa", mode))
			w.org.must(403, "POST", orgPath+"/deployments", deployBody("qa", mode))
		}
		if n := w.deployments("qa"); n != 0 {
			t.Fatalf("refused deployments were stored: %d", n)
		}
		if _, err := e.Client.Workspaces.Read(ctx, "acme", "my-project-qa"); err != tfe.ErrResourceNotFound {
			t.Fatalf("a refused deployment made the environment's workspace (%v)", err)
		}

		// A member who may not see dev's workspace can neither deploy to
		// it nor preview a deployment (404, as for the workspace).
		before := w.deployments("dev")
		rollback := map[string]any{"project_id": "my-project", "env_id": "dev", "mode": "rollback", "rollback_to_deployment_id": w.depID}
		dry := deployBody("dev", "deploy")
		dry["is_dry_run"] = true
		for _, body := range []map[string]any{deployBody("dev", "deploy"), deployBody("dev", "plan_only"), deployBody("dev", "destroy"), rollback, dry} {
			w.member.must(404, "POST", orgPath+"/deployments", body)
		}
		// Plan access: plan-only deployments, nothing that applies.
		for _, body := range []map[string]any{deployBody("dev", "deploy"), deployBody("dev", "destroy"), rollback} {
			w.planner.must(403, "POST", orgPath+"/deployments", body)
		}
		// Nor can an organization token plan or apply in it; it may
		// preview.
		for _, mode := range []string{"deploy", "plan_only", "destroy"} {
			w.org.must(403, "POST", orgPath+"/deployments", deployBody("dev", mode))
		}
		w.org.must(200, "POST", orgPath+"/deployments", dry)
		if n := w.deployments("dev"); n != before {
			t.Fatalf("refused deployments were stored: %d, want %d", n, before)
		}
		plan := w.planner.must(202, "POST", orgPath+"/deployments", deployBody("dev", "plan_only"))
		if d := w.waitDeployment(plan["id"].(string)); d["status"] != "succeeded" {
			t.Fatalf("the planner's plan-only deployment: %v", d)
		} else if r, err := e.Client.Runs.Read(ctx, d["run_id"].(string)); err != nil || r.Status != tfe.RunPlannedAndFinished {
			t.Fatalf("the plan-only deployment's run: %v %v", r, err)
		}

		// Configuration objects stay the owners' (and the organization
		// token's): deploying does not make one a platform engineer.
		for _, c := range []apiClient{w.deployer, w.member, w.reader} {
			c.must(403, "POST", orgPath+"/resource-types", map[string]any{"id": "cache", "output_schema": map[string]any{"type": "object"}})
			c.must(403, "PUT", orgPath+"/modules/db", map[string]any{"resource_type": "db", "module_source_code": `output "host" { value = "evil" }`})
			c.must(403, "DELETE", orgPath+"/module-rules/nope", nil)
		}
		w.org.must(201, "POST", orgPath+"/resource-types", map[string]any{"id": "cache", "output_schema": map[string]any{"type": "object"}})

		// The deployer may destroy what it deployed.
		destroy := w.deployer.must(202, "POST", orgPath+"/deployments", deployBody("dev", "destroy"))
		if d := w.waitDeployment(destroy["id"].(string)); d["status"] != "succeeded" {
			t.Fatalf("the deployer's destroy: %v", d)
		} else if r, err := e.Client.Runs.Read(ctx, d["run_id"].(string)); err != nil || r.Status != tfe.RunApplied || !r.IsDestroy {
			t.Fatalf("the destroy's run: %v %v", r, err)
		}
	})
}

// TestEnvironmentReadPermissions: an environment's deployments, their
// graphs, diffs and Terraform need read access to its workspace, its
// outputs the workspace's state outputs, and sensitive values its state.
func TestEnvironmentReadPermissions(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		w := newGrantedWorld(t, e)
		dep := "/deployments/" + w.depID
		for _, p := range []string{dep, dep + "/graph", dep + "/tf", dep + "/diff", dep + "/diff?from=" + w.depID,
			"/projects/my-project/envs/dev/deployments", "/projects/my-project/envs/dev/outputs", "/projects/my-project/envs/dev/outputs?sensitive=true"} {
			if st, out := w.member.call("GET", orgPath+p, nil); st != 404 || strings.Contains(jsonText(out), secretOut) || strings.Contains(jsonText(out), "db.internal") {
				t.Errorf("the member reads %s: %d %v", p, st, out)
			}
		}
		// The organization's configuration stays readable to members, and
		// so do environments without a workspace.
		w.member.must(200, "GET", orgPath+"/projects/my-project/envs/dev", nil)
		w.member.must(200, "GET", orgPath+"/projects/my-project/envs/qa/deployments", nil)
		w.member.must(200, "GET", orgPath+"/projects/my-project/envs/qa/outputs", nil)

		for _, c := range []apiClient{w.planner, w.reader, w.outputReader, w.org} {
			for _, p := range []string{dep, dep + "/graph", dep + "/tf", dep + "/diff", "/projects/my-project/envs/dev/deployments"} {
				c.must(200, "GET", orgPath+p, nil)
			}
			out := c.must(200, "GET", orgPath+"/projects/my-project/envs/dev/outputs", nil)
			if s := jsonText(out); !strings.Contains(s, "db.internal") || strings.Contains(s, secretOut) {
				t.Fatalf("outputs without sensitive values: %s", s)
			}
		}
		for _, c := range []apiClient{w.reader, w.org} {
			if s := jsonText(c.must(200, "GET", orgPath+"/projects/my-project/envs/dev/outputs?sensitive=true", nil)); !strings.Contains(s, secretOut) {
				t.Fatalf("outputs with sensitive values: %s", s)
			}
		}
		w.outputReader.must(403, "GET", orgPath+"/projects/my-project/envs/dev/outputs?sensitive=true", nil)
	})
}

// TestOrchestratorRefusesMachineTokens: run, agent and task-result tokens
// of the organization reach no endpoint of the orchestrator, not even to
// read; nothing they ask for happens.
func TestOrchestratorRefusesMachineTokens(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		w := newOrchWorld(t, e)
		first := w.admin.must(202, "POST", orgPath+"/deployments", deployBody("dev", "deploy"))
		if d := w.waitDeployment(first["id"].(string)); d["status"] != "succeeded" {
			t.Fatalf("the first deployment: %v", d)
		}
		depID := first["id"].(string)
		envWS, err := e.Client.Workspaces.Read(ctx, "acme", "my-project-dev")
		if err != nil {
			t.Fatal(err)
		}
		builder, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("builder")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, e.Client, builder.ID, `resource "terraform_data" "a" {}`)
		elsewhere, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: builder, ConfigurationVersion: cv})
		if err != nil {
			t.Fatal(err)
		}
		// A destroy run of the environment's own workspace, waiting for
		// confirmation: its token may read that workspace's state through
		// /api/v2, but not use the orchestrator.
		own, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: envWS, IsDestroy: tfe.Bool(true), AutoApply: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		pool, err := e.Client.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("pool")})
		if err != nil {
			t.Fatal(err)
		}
		agentTok, err := e.Client.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("agent")})
		if err != nil {
			t.Fatal(err)
		}
		scanned, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("scanned")})
		if err != nil {
			t.Fatal(err)
		}
		tokens := map[string]string{
			"a run token of another workspace's run":           w.runToken(elsewhere),
			"a run token of the environment's workspace's run": w.runToken(own),
			"an agent token":        agentTok.Token,
			"a task result's token": w.taskResultToken(scanned),
		}
		env := "/projects/my-project/envs/dev"
		requests := []struct {
			method, path string
			body         any
		}{
			{"POST", "/deployments", deployBody("dev", "destroy")},
			{"POST", "/deployments", deployBody("dev", "deploy")},
			{"POST", "/deployments", deployBody("dev", "plan_only")},
			{"POST", "/deployments", deployBody("qa", "deploy")},
			{"POST", "/deployments", map[string]any{"project_id": "my-project", "env_id": "dev", "mode": "rollback", "rollback_to_deployment_id": depID}},
			{"GET", "/deployments/" + depID, nil},
			{"GET", "/deployments/" + depID + "/graph", nil},
			{"GET", "/deployments/" + depID + "/tf", nil},
			{"GET", "/deployments/" + depID + "/diff", nil},
			{"GET", env + "/deployments", nil},
			{"GET", env + "/outputs", nil},
			{"GET", env + "/outputs?sensitive=true", nil},
			{"GET", "/projects", nil},
			{"GET", "/projects/my-project", nil},
			{"POST", "/projects", map[string]any{"id": "new"}},
			{"PUT", "/projects/my-project", map[string]any{"display_name": "Mine"}},
			{"DELETE", "/projects/my-project", nil},
			{"GET", "/env-types", nil},
			{"POST", "/env-types", map[string]any{"id": "production"}},
			{"GET", "/projects/my-project/envs", nil},
			{"GET", env, nil},
			{"POST", "/projects/my-project/envs", map[string]any{"id": "prod", "env_type_id": "development"}},
			{"DELETE", env, nil},
			{"GET", "/resource-types", nil},
			{"POST", "/resource-types", map[string]any{"id": "cache", "output_schema": map[string]any{"type": "object"}}},
			{"PUT", "/resource-types/db", map[string]any{"output_schema": map[string]any{"type": "object"}}},
			{"GET", "/module-providers", nil},
			{"GET", "/module-providers/random", nil},
			{"POST", "/module-providers/random", map[string]any{"id": "default", "source": "hashicorp/random"}},
			{"GET", "/modules", nil},
			{"GET", "/modules/db", nil},
			{"GET", "/modules/db/versions", nil},
			{"PUT", "/modules/db", map[string]any{"resource_type": "db", "module_source_code": `output "host" { value = "evil" }`}},
			{"DELETE", "/modules/db", nil},
			{"GET", "/module-rules", nil},
			{"POST", "/module-rules", map[string]any{"module_id": "db", "env_id": "dev", "project_id": "my-project"}},
		}
		deps := w.deployments("dev")
		for who, tok := range tokens {
			c := apiClient{t: t, e: e, token: tok}
			for _, r := range requests {
				if st, out := c.call(r.method, orgPath+r.path, r.body); st != http.StatusForbidden {
					t.Errorf("%s: %s %s: %d %v, want 403", who, r.method, r.path, st, out)
				}
			}
		}
		if n := w.deployments("dev"); n != deps {
			t.Fatalf("the environment has %d deployments, had %d", n, deps)
		}
		if _, err := e.Client.Workspaces.Read(ctx, "acme", "my-project-qa"); err != tfe.ErrResourceNotFound {
			t.Fatalf("a refused deployment made a workspace (%v)", err)
		}
		if m := w.admin.must(200, "GET", orgPath+"/modules/db/versions", nil)["list"].([]any); len(m) != 1 {
			t.Fatalf("module db has %d versions, want 1", len(m))
		}
		if err := e.Client.Runs.Discard(ctx, own.ID, tfe.RunDiscardOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
