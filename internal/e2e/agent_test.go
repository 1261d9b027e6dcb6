package e2e

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// agentProc is a `terrace agent` process.
type agentProc = testenv.AgentProcess

// startAgent starts `terrace agent` for p with token; extra flags come
// last (they win over the defaults of testenv.StartAgent).
func startAgent(t *testing.T, p *proc, token, name string, extra ...string) *agentProc {
	t.Helper()
	return testenv.StartAgent(t, p.Process, token, name, extra...)
}

func readAll(t *testing.T, r io.Reader, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	done := make(chan error, 1)
	go func() { _, err := b.ReadFrom(r); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a log never ended")
	}
	return b.String()
}

func waitAgentStatus(ctx context.Context, t *testing.T, c *tfe.Client, id, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		a, err := c.Agents.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if a.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %s is %s after %s, want %s", id, a.Status, limit, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAgentRunsPoolWorkspaces: a workspace in agent execution mode runs
// only on its pool's agents. With no agent its run waits, visibly; a
// `terrace agent` started later runs its plan and apply (the logs name the
// agent); an agent killed with SIGKILL mid-apply loses its job within the
// heartbeat timeout, the workspace unlocks, and what the apply had made
// is in the current state (the runner uploaded terraform's snapshot); an
// agent told to stop exits and says so.
//
// Along the way the agents go through every status HCP Terraform shows:
// idle (also for longer than the heartbeat timeout: an idle agent's
// long-poll follows the server's lease), errored (a run needs a
// terraform version the agent cannot find; the agent stays errored until
// it takes its next job), busy (for longer than the heartbeat timeout,
// with the agent's own --heartbeat far longer: it follows the lease the
// server gives at claim time), unknown (killed), exited (SIGTERM), and
// errored before exiting (its scratch folder cannot be written).
func TestAgentRunsPoolWorkspaces(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	const heartbeatTimeout = 3 * time.Second
	p := startProc(t, t.TempDir(), "", "", "--job-heartbeat-timeout", heartbeatTimeout.String())
	ctx := mustCtx()
	c := p.Client
	pool, tok := acmeAgentPool(ctx, t, c)
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("private-app"),
		ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID)})
	if err != nil {
		t.Fatal(err)
	}
	cv := uploadConfig(ctx, t, c, ws.ID, slowApplyConfig)

	// No agent yet: the run waits in the queue (the server's own runner,
	// idle, does not take it) and its events say what it waits for.
	first := createRun(ctx, t, c, ws.ID, cv.ID, nil)
	time.Sleep(2 * time.Second)
	if r, err := c.Runs.Read(ctx, first.ID); err != nil || r.Status != tfe.RunPlanQueued {
		t.Fatalf("with no agent the run is %v (%v), want plan_queued", r.Status, err)
	}
	checkWaitsForAgent(ctx, t, c, first.ID, "private")

	// An agent starts: it runs the plan and the apply.
	// Its --heartbeat is far longer than the server's lease: the lease the
	// server gives with each job wins.
	one := startAgent(t, p, tok.Token, "agent-one", "--heartbeat", "1m")
	first = waitRun(ctx, t, c, first.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored, tfe.RunCanceled)
	if first.Status != tfe.RunApplied {
		t.Fatalf("the run on the agent ended %s", first.Status)
	}
	pr, err := c.Plans.Logs(ctx, first.Plan.ID)
	planLog := readAll(t, pr, err)
	ar, err := c.Applies.Logs(ctx, first.Apply.ID)
	applyLog := readAll(t, ar, err)
	for name, log := range map[string]string{"plan": planLog, "apply": applyLog} {
		if !strings.Contains(log, `agent "agent-one"`) {
			t.Fatalf("the %s log does not name the agent that ran it:\n%s", name, log)
		}
	}
	// The plan's JSON, which the agent made beside the apply, came over
	// the job protocol before the job ended.
	if raw, err := c.Plans.ReadJSONOutput(ctx, first.Plan.ID); err != nil || !strings.Contains(string(raw), `"resource_changes"`) {
		t.Fatalf("the plan JSON of the run on the agent (%v): %.200s", err, raw)
	}
	agents, err := c.Agents.List(ctx, pool.ID, nil)
	if err != nil || len(agents.Items) != 1 || agents.Items[0].Name != "agent-one" {
		t.Fatalf("agents of the pool: %+v (%v), want agent-one", agents, err)
	}
	oneID := agents.Items[0].ID
	waitAgentStatus(ctx, t, c, oneID, "idle", 30*time.Second)

	// A job the agent cannot run because of itself (no such terraform on
	// the agent): the run errors saying why, the agent reads errored.
	old, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("private-old"),
		ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID), TerraformVersion: tfe.String("1.0.99")})
	if err != nil {
		t.Fatal(err)
	}
	oldCV := uploadConfig(ctx, t, c, old.ID, slowApplyConfig)
	bad := createRun(ctx, t, c, old.ID, oldCV.ID, nil)
	if bad = waitRun(ctx, t, c, bad.ID, time.Minute, tfe.RunErrored, tfe.RunApplied, tfe.RunCanceled); bad.Status != tfe.RunErrored {
		t.Fatalf("a run needing terraform 1.0.99 on the agent ended %s, want errored", bad.Status)
	}
	pr, err = c.Plans.Logs(ctx, bad.Plan.ID)
	if log := readAll(t, pr, err); !strings.Contains(log, `1.0.99 is not installed on agent "agent-one"`) {
		t.Fatalf("the errored plan's log does not say the engine is missing on the agent:\n%s", log)
	}
	waitAgentStatus(ctx, t, c, oneID, "errored", 30*time.Second)

	// A slow apply in a workspace without state; the agent dies mid-apply
	// once the first resource's snapshot reached the server.
	fresh, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("private-fresh"),
		ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID)})
	if err != nil {
		t.Fatal(err)
	}
	freshCV := uploadConfig(ctx, t, c, fresh.ID, slowApplyConfig)
	slow := createRun(ctx, t, c, fresh.ID, freshCV.ID, []*tfe.RunVariable{{Key: "sleep", Value: "120"}})
	waitRun(ctx, t, c, slow.ID, 3*time.Minute, tfe.RunApplying)
	applying := time.Now()
	waitAgentStatus(ctx, t, c, oneID, "busy", 30*time.Second)
	var snap *tfe.StateVersion
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if snap, err = c.StateVersions.ReadCurrent(ctx, fresh.ID); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no state snapshot reached the server during the apply: %v", err)
		}
	}
	// Twice the heartbeat timeout into the apply, the agent (whose own
	// --heartbeat is a minute) still holds its job and reads busy.
	time.Sleep(time.Until(applying.Add(2 * heartbeatTimeout)))
	if r, _ := c.Runs.Read(ctx, slow.ID); r == nil || r.Status != tfe.RunApplying {
		t.Fatalf("the run is no longer applying %s into the apply: %+v", 2*heartbeatTimeout, r)
	}
	if a, err := c.Agents.Read(ctx, oneID); err != nil || a.Status != "busy" {
		t.Fatalf("the applying agent reads %v (%v), want busy", a, err)
	}
	if err := one.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = one.Cmd.Process.Wait()
	killed := time.Now()
	got := waitRun(ctx, t, c, slow.ID, time.Minute, tfe.RunErrored, tfe.RunApplied, tfe.RunCanceled)
	if got.Status != tfe.RunErrored {
		t.Fatalf("the run whose agent was killed mid-apply is %s, want errored", got.Status)
	}
	t.Logf("the killed agent's run errored %s after the kill (heartbeat timeout %s)", time.Since(killed).Round(100*time.Millisecond), heartbeatTimeout)
	w, err := c.Workspaces.ReadByID(ctx, fresh.ID)
	if err != nil || w.Locked {
		t.Fatalf("the workspace is locked after its run's agent died (%v)", err)
	}
	cur, err := c.StateVersions.ReadCurrent(ctx, fresh.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cur.ID != snap.ID && cur.Serial < snap.Serial {
		t.Fatalf("the current state %s (serial %d) is older than the snapshot %s (serial %d)", cur.ID, cur.Serial, snap.ID, snap.Serial)
	}
	raw, err := c.StateVersions.Download(ctx, cur.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"terraform_data"`)) || !bytes.Contains(raw, []byte(`"name": "app"`)) {
		t.Fatalf("the current state does not hold the resource the killed apply created:\n%s", raw)
	}
	waitAgentStatus(ctx, t, c, oneID, "unknown", time.Minute)

	// The next run of the workspace sees what the killed one made: a new
	// agent plans no new terraform_data.app.
	two := startAgent(t, p, tok.Token, "agent-two")
	next := createRun(ctx, t, c, fresh.ID, freshCV.ID, nil)
	next = waitRun(ctx, t, c, next.ID, 3*time.Minute, tfe.RunApplied, tfe.RunPlannedAndFinished, tfe.RunErrored, tfe.RunCanceled)
	if next.Status != tfe.RunApplied && next.Status != tfe.RunPlannedAndFinished {
		t.Fatalf("the run after the kill ended %s", next.Status)
	}
	if pl, err := c.Plans.Read(ctx, next.Plan.ID); err != nil || pl.ResourceAdditions != 0 {
		t.Fatalf("the run after the kill plans to add %d resources (%v): it did not see the snapshot", pl.ResourceAdditions, err)
	}

	// SIGTERM: the idle agent takes no new job, exits and says so.
	twoID := agentNamed(ctx, t, c, pool.ID, "agent-two").ID
	// Idle for longer than the heartbeat timeout, it still reads idle: its
	// claims come back within the lease.
	waitAgentStatus(ctx, t, c, twoID, "idle", 30*time.Second)
	time.Sleep(2 * heartbeatTimeout)
	if a, err := c.Agents.Read(ctx, twoID); err != nil || a.Status != "idle" {
		t.Fatalf("an agent idle for %s reads %v (%v), want idle", 2*heartbeatTimeout, a, err)
	}
	if err := two.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := two.Cmd.Wait(); err != nil {
		t.Fatalf("the agent did not exit cleanly on SIGTERM: %v", err)
	}
	waitAgentStatus(ctx, t, c, twoID, "exited", 10*time.Second)

	// A fatal error: no job could get a working folder on this agent. It
	// reports errored and exits with an error.
	notDir := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	three := startAgent(t, p, tok.Token, "agent-three", "--scratch-dir", filepath.Join(notDir, "scratch"))
	if err := three.Cmd.Wait(); err == nil {
		t.Fatal("an agent that cannot make working folders exited without an error")
	}
	if threeStatus := agentNamed(ctx, t, c, pool.ID, "agent-three").Status; threeStatus != "errored" {
		t.Fatalf("the agent that could not make working folders reads %q, want errored", threeStatus)
	}
}

// agentNamed returns the agent of a pool with that name.
func agentNamed(ctx context.Context, t *testing.T, c *tfe.Client, poolID, name string) *tfe.Agent {
	t.Helper()
	agents, err := c.Agents.List(ctx, poolID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents.Items {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("pool %s has no agent named %s: %+v", poolID, name, agents.Items)
	return nil
}

// checkWaitsForAgent fails unless a run's events say it waits for an
// agent of the pool named pool.
func checkWaitsForAgent(ctx context.Context, t *testing.T, c *tfe.Client, runID, pool string) {
	t.Helper()
	events, err := c.RunEvents.List(ctx, runID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.Action == "waiting-for-agent" && strings.Contains(ev.Description, pool) {
			return
		}
	}
	t.Fatalf("the queued run %s's events do not say it waits for an agent of pool %s: %+v", runID, pool, events.Items)
}

// acmeAgentPool makes organization acme with an agent pool named private
// and returns the pool and an agent token of it.
func acmeAgentPool(ctx context.Context, t *testing.T, c *tfe.Client) (*tfe.AgentPool, *tfe.AgentToken) {
	t.Helper()
	if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	pool, err := c.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("private")})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("e2e")})
	if err != nil {
		t.Fatal(err)
	}
	return pool, tok
}
