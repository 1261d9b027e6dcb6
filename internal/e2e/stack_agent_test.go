package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestStackRunsOnAgents: a stack in execution mode "agent" runs its
// deployments' plans and applies only on its pool's agents, as a
// workspace in agent mode does. With no agent the deployment run waits:
// its plan's run stays queued (the server's own runner, idle, does not
// take it) and says it waits for an agent of the pool; a `terrace agent`
// started later runs the plan and the apply (the logs name it) and the
// deployment run succeeds.
func TestStackRunsOnAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	p := startProc(t, t.TempDir(), "", "")
	ctx := mustCtx()
	c := p.Client
	pool, tok := acmeAgentPool(ctx, t, c)
	prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "private-net", Project: &tfe.Project{ID: prj.ID}, AgentPool: &tfe.AgentPool{ID: pool.ID}})
	if err != nil {
		t.Fatal(err)
	}
	// go-tfe sends no execution-mode: set it as the API takes it.
	setStackAgentMode(t, p, st.ID, pool.ID)

	cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/stack-agent", nil)
	if err != nil {
		t.Fatal(err)
	}
	wsName := "stack-" + st.ID + "-private"

	// No agent: the deployment's plan waits in the queue, visibly.
	var planRun *tfe.Run
	for deadline := time.Now().Add(time.Minute); planRun == nil; time.Sleep(200 * time.Millisecond) {
		if ws, err := c.Workspaces.Read(ctx, "acme", wsName); err == nil {
			if runs, err := c.Runs.List(ctx, ws.ID, nil); err == nil && len(runs.Items) > 0 {
				planRun = runs.Items[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the deployment run started no plan on its workspace within a minute")
		}
	}
	ws, err := c.Workspaces.Read(ctx, "acme", wsName)
	if err != nil {
		t.Fatal(err)
	}
	if ws.ExecutionMode != "agent" || ws.AgentPool == nil || ws.AgentPool.ID != pool.ID {
		t.Fatalf("the deployment's workspace runs in mode %q on pool %+v, want agent on %s", ws.ExecutionMode, ws.AgentPool, pool.ID)
	}
	time.Sleep(2 * time.Second) // the server's idle runner would have taken it by now
	if r, err := c.Runs.Read(ctx, planRun.ID); err != nil || r.Status != tfe.RunPlanQueued {
		t.Fatalf("with no agent the deployment's plan is %v (%v), want plan_queued", r.Status, err)
	}
	checkWaitsForAgent(ctx, t, c, planRun.ID, "private")
	g, err := c.StackDeploymentGroups.ReadByName(ctx, cfg.ID, "auto")
	if err != nil {
		t.Fatal(err)
	}
	druns, err := c.StackDeploymentRuns.List(ctx, g.ID, nil)
	if err != nil || len(druns.Items) != 1 {
		t.Fatalf("deployment runs of group auto: %+v (%v)", druns, err)
	}
	drun := druns.Items[0]
	if drun, err = c.StackDeploymentRuns.Read(ctx, drun.ID); err != nil || isFinalDeployment(drun.Status) {
		t.Fatalf("with no agent the deployment run is %v (%v), want it waiting", drun.Status, err)
	}

	// An agent starts: the deployment converges on it.
	startAgent(t, p, tok.Token, "stack-agent")
	for deadline := time.Now().Add(3 * time.Minute); !isFinalDeployment(drun.Status); time.Sleep(200 * time.Millisecond) {
		if drun, err = c.StackDeploymentRuns.Read(ctx, drun.ID); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deployment run is still %s 3 minutes after an agent started", drun.Status)
		}
	}
	if drun.Status != "succeeded" {
		t.Fatalf("the deployment run on the agent ended %s", drun.Status)
	}
	runs, err := c.Runs.List(ctx, ws.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs.Items {
		pr, err := c.Plans.Logs(ctx, r.Plan.ID)
		if log := readAll(t, pr, err); !strings.Contains(log, `agent "stack-agent"`) {
			t.Fatalf("the plan of run %s does not name the agent that ran it:\n%s", r.ID, log)
		}
		if r.Status == tfe.RunApplied {
			ar, err := c.Applies.Logs(ctx, r.Apply.ID)
			if log := readAll(t, ar, err); !strings.Contains(log, `agent "stack-agent"`) {
				t.Fatalf("the apply of run %s does not name the agent that ran it:\n%s", r.ID, log)
			}
		}
	}
	if ws, err = c.Workspaces.ReadByID(ctx, ws.ID); err != nil || ws.ResourceCount != 1 {
		t.Fatalf("the deployment's workspace holds %d resources (%v), want 1", ws.ResourceCount, err)
	}
}

func isFinalDeployment(s tfe.DeploymentRunStatus) bool {
	return s == "succeeded" || s == "failed" || s == "abandoned"
}

// setStackAgentMode puts a stack in execution mode "agent" on pool.
func setStackAgentMode(t *testing.T, p *proc, stackID, pool string) {
	t.Helper()
	body := `{"data":{"type":"stacks","attributes":{"execution-mode":"agent"},` +
		`"relationships":{"agent-pool":{"data":{"type":"agent-pools","id":"` + pool + `"}}}}}`
	code, raw := testenv.Raw(t, p.HTTP, p.URL, p.Token, http.MethodPatch, "/api/v2/stacks/"+stackID, body)
	var out struct {
		Data struct {
			Attributes struct {
				ExecutionMode string `json:"execution-mode"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || code != http.StatusOK || out.Data.Attributes.ExecutionMode != "agent" {
		t.Fatalf("setting the stack's execution mode: status %d, %s, %v", code, raw, err)
	}
}
