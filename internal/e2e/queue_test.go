package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// lockedBuffer is an io.Writer a running command writes to while the test
// reads what it has so far.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return plain(l.b.String())
}

// TestCLIWaitsInTheWorkspaceQueue: while its run waits, terraform's cloud
// backend tells why from the workspace's current run. Behind a run that
// holds the workspace (planned, waiting for confirmation), the CLI counts
// its place in the queue down to the current run: so a run waiting behind
// another is not the current one, the one that holds the workspace is.
// On a workspace a user locked, the waiting run is the head of the queue
// and current, and the CLI says it waits for the unlock. Each apply goes
// on once the workspace is free.
func TestCLIWaitsInTheWorkspaceQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	eng := engines(t)[0]
	e := testenv.New(t, testenv.Options{})
	c := e.Client
	ctx := context.Background()
	const org, name = "acme", "queued"
	testenv.NewOrg(t, c, org)
	ws, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(name), TerraformVersion: tfe.String(eng.Version)})
	if err != nil {
		t.Fatal(err)
	}
	cl := newEngineCLI(t, e, eng)
	dir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, org, name) + `resource "terraform_data" "r" { input = timestamp() }` + "\n"})
	cl.run(dir, "init")

	// apply starts `terraform apply -auto-approve`, waits until its output
	// says want, checks that the workspace's current run is current's,
	// calls free, and waits for the apply to finish.
	apply := func(want, avoid string, current func() string, free func()) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, cl.bin, "apply", "-auto-approve")
		cmd.Dir, cmd.Env = dir, cl.env
		var out lockedBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for deadline := time.Now().Add(90 * time.Second); !strings.Contains(out.String(), want); time.Sleep(100 * time.Millisecond) {
			select {
			case err := <-done:
				t.Fatalf("terraform apply ended (%v) without saying %q:\n%s", err, want, out.String())
			default:
			}
			if strings.Contains(out.String(), avoid) {
				t.Fatalf("terraform apply said %q:\n%s", avoid, out.String())
			}
			if time.Now().After(deadline) {
				t.Fatalf("terraform apply did not say %q in 90s:\n%s", want, out.String())
			}
		}
		w, err := c.Workspaces.ReadByID(ctx, ws.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := current(); w.CurrentRun == nil || w.CurrentRun.ID != want {
			t.Errorf("while the CLI's run waits, the workspace's current run is %+v, want %s", w.CurrentRun, want)
		}
		free()
		if err := <-done; err != nil {
			t.Fatalf("terraform apply: %v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "Apply complete!") {
			t.Fatalf("terraform apply did not apply:\n%s", out.String())
		}
	}

	// A run that holds the workspace: planned, not confirmed.
	cv := testenv.UploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "held" {}`)
	holder, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
	if err != nil {
		t.Fatal(err)
	}
	if holder = waitRun(ctx, t, c, holder.ID, 2*time.Minute, tfe.RunPlanned, tfe.RunErrored); holder.Status != tfe.RunPlanned {
		t.Fatalf("the holding run ended %s: %s", holder.Status, erroredReason(ctx, t, c, holder.ID))
	}
	apply("Waiting for 1 run(s) to finish before being queued", "manually locked", func() string { return holder.ID }, func() {
		if err := c.Runs.Discard(ctx, holder.ID, tfe.RunDiscardOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	// A user's lock: the CLI's run is the head of the queue.
	if _, err := c.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{Reason: tfe.String("maintenance")}); err != nil {
		t.Fatal(err)
	}
	pending := func() string {
		rl, err := c.Runs.List(ctx, ws.ID, &tfe.RunListOptions{Status: string(tfe.RunPending)})
		if err != nil || len(rl.Items) != 1 {
			t.Fatalf("pending runs: %+v %v", rl, err)
		}
		return rl.Items[0].ID
	}
	var waiting string
	apply("Waiting for the manually locked workspace to be unlocked", "run(s) to finish", func() string {
		waiting = pending()
		return waiting
	}, func() {
		if _, err := c.Workspaces.Unlock(ctx, ws.ID); err != nil {
			t.Fatal(err)
		}
	})
	if w, err := c.Workspaces.ReadByID(ctx, ws.ID); err != nil || w.CurrentRun == nil || w.CurrentRun.ID != waiting {
		t.Fatalf("after its apply the workspace's current run is %+v (%v), want the CLI's run %s", w.CurrentRun, err, waiting)
	}
}
