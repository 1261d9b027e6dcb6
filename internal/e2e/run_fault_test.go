package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

const slowApplyConfig = `
variable "sleep" {
  type    = number
  default = 0
}
variable "name" {
  type    = string
  default = "first"
}
resource "terraform_data" "app" {
  input = var.name
}
resource "terraform_data" "slow" {
  count      = var.sleep > 0 ? 1 : 0
  depends_on = [terraform_data.app]
  provisioner "local-exec" {
    command = "sleep ${var.sleep}"
  }
}
`

// TestKillDuringApply kills the server while a run is applying. After a
// restart the run has errored with a message saying why, the workspace is
// unlocked, the current state is the last snapshot the apply saved (what
// it had made is recorded), and a new run plans and applies.
func TestKillDuringApply(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range []string{"sqlite", "postgres"} {
		t.Run(st, func(t *testing.T) {
			database := ""
			if st == "postgres" {
				database = storetest.PostgresDSN(t)
			}
			p := startProc(t, t.TempDir(), database, "")
			ctx := mustCtx()
			c := p.Client
			if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
				t.Fatal(err)
			}
			ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app"), ExecutionMode: tfe.String("remote")})
			if err != nil {
				t.Fatal(err)
			}
			cv := uploadConfig(ctx, t, c, ws.ID, slowApplyConfig)

			// A first run applies and stores state: that is what must
			// stay current after the crash.
			first := createRun(ctx, t, c, ws.ID, cv.ID, nil)
			first = waitRun(ctx, t, c, first.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
			if first.Status != tfe.RunApplied {
				t.Fatalf("first run ended %s", first.Status)
			}
			sv1, err := c.StateVersions.ReadCurrent(ctx, ws.ID)
			if err != nil {
				t.Fatalf("no state after the first run: %v", err)
			}

			// A second workspace never had state: its first run is killed
			// too: what it had made before the kill must be in its state.
			fresh, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("fresh"), ExecutionMode: tfe.String("remote")})
			if err != nil {
				t.Fatal(err)
			}
			freshCV := uploadConfig(ctx, t, c, fresh.ID, slowApplyConfig)

			// The runs apply slowly; kill the server mid-apply.
			slowVars := []*tfe.RunVariable{{Key: "sleep", Value: "60"}, {Key: "name", Value: `"second"`}}
			slow := createRun(ctx, t, c, ws.ID, cv.ID, slowVars)
			slowFresh := createRun(ctx, t, c, fresh.ID, freshCV.ID, slowVars)
			waitRun(ctx, t, c, slow.ID, 3*time.Minute, tfe.RunApplying)
			waitRun(ctx, t, c, slowFresh.ID, 3*time.Minute, tfe.RunApplying)
			// terraform saves state after each resource and the runner
			// uploads it: wait for the apply's first snapshots, then kill
			// the server while the slow resource is still being made.
			snap := waitSnapshot(ctx, t, c, ws.ID, sv1.ID)
			freshSnap := waitSnapshot(ctx, t, c, fresh.ID, "")
			p.kill()
			// The killed server's terraform does not go on changing
			// resources behind the errored run's back. (Left alone it
			// dies of SIGPIPE at its next progress line, up to 10s later;
			// a provisioner's own processes may outlive it.)
			for deadline := time.Now().Add(3 * time.Second); terraformOf(slow.ID) || terraformOf(slowFresh.ID); time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("terraform is still applying 3s after its server was killed")
				}
			}

			p = p.restart()
			c = p.Client
			got := waitRun(ctx, t, c, slow.ID, time.Minute, tfe.RunErrored, tfe.RunApplied, tfe.RunCanceled, tfe.RunPlanQueued, tfe.RunApplyQueued)
			if got.Status != tfe.RunErrored {
				t.Fatalf("the run killed mid-apply is %s after the restart, want errored", got.Status)
			}
			if why := erroredReason(ctx, t, c, slow.ID); !strings.Contains(why, "server restarted") || !strings.Contains(why, "applying") {
				t.Fatalf("the errored event does not say why: %q", why)
			}
			if a, err := c.Applies.Read(ctx, got.Apply.ID); err != nil || a.Status != tfe.ApplyErrored {
				t.Fatalf("apply of the killed run: %+v %v", a, err)
			}
			// The apply log ends and says why.
			if rd, err := c.Applies.Logs(ctx, got.Apply.ID); err != nil {
				t.Fatalf("apply log: %v", err)
			} else {
				var b bytes.Buffer
				done := make(chan struct{})
				go func() { _, _ = b.ReadFrom(rd); close(done) }()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Fatal("the apply log of the killed run never ends")
				}
				if !strings.Contains(b.String(), "server restarted") {
					t.Fatalf("apply log does not say why it ended:\n%s", b.String())
				}
			}
			w, err := c.Workspaces.ReadByID(ctx, ws.ID)
			if err != nil {
				t.Fatal(err)
			}
			if w.Locked {
				t.Fatal("the workspace is still locked after the killed run was recovered")
			}
			cur, err := c.StateVersions.ReadCurrent(ctx, ws.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cur.ID == sv1.ID || cur.Serial < snap.Serial {
				t.Fatalf("current state after the crash is %s (serial %d), want the killed apply's last snapshot (%s, serial %d, or later)", cur.ID, cur.Serial, snap.ID, snap.Serial)
			}

			// The killed runs' job folders (variable files, sensitive
			// values among them) were removed at the restart.
			if entries, err := os.ReadDir(os.TempDir()); err == nil {
				for _, e := range entries {
					if strings.Contains(e.Name(), slow.ID) || strings.Contains(e.Name(), slowFresh.ID) {
						t.Fatalf("job folder %s of a killed run is left after the restart", e.Name())
					}
				}
			}

			// The fresh workspace keeps what its killed run had made.
			if got := waitRun(ctx, t, c, slowFresh.ID, time.Minute, tfe.RunErrored, tfe.RunApplied, tfe.RunCanceled); got.Status != tfe.RunErrored {
				t.Fatalf("the fresh workspace's killed run is %s, want errored", got.Status)
			}
			if sv, err := c.StateVersions.ReadCurrent(ctx, fresh.ID); err != nil || sv.Serial < freshSnap.Serial {
				t.Fatalf("the fresh workspace's current state is %+v (%v), want the killed apply's snapshot %s", sv, err, freshSnap.ID)
			}
			if w, err := c.Workspaces.ReadByID(ctx, fresh.ID); err != nil || w.Locked {
				t.Fatalf("the fresh workspace is locked after its killed run was recovered (%v)", err)
			}

			// The workspace goes on: a new run plans and applies.
			next := createRun(ctx, t, c, ws.ID, cv.ID, []*tfe.RunVariable{{Key: "name", Value: `"third"`}})
			next = waitRun(ctx, t, c, next.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored, tfe.RunCanceled)
			if next.Status != tfe.RunApplied {
				t.Fatalf("a run after the recovery ended %s", next.Status)
			}
			if cur, err := c.StateVersions.ReadCurrent(ctx, ws.ID); err != nil || cur.ID == sv1.ID {
				t.Fatalf("the run after the recovery stored no state: %v", err)
			}
			if w, _ := c.Workspaces.ReadByID(ctx, ws.ID); w == nil || w.Locked {
				t.Fatal("workspace locked after the last run")
			}
		})
	}
}

// waitSnapshot waits until the workspace's current state version is no
// longer not (a snapshot of a running apply has arrived) and returns it.
func waitSnapshot(ctx context.Context, t *testing.T, c *tfe.Client, wsID, not string) *tfe.StateVersion {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		sv, err := c.StateVersions.ReadCurrent(ctx, wsID)
		if err == nil && sv.ID != not {
			return sv
		}
		if time.Now().After(deadline) {
			t.Fatalf("no state snapshot of the running apply reached workspace %s in a minute (%v)", wsID, err)
		}
	}
}

// terraformOf reports whether a terraform process of the run is alive (the
// runner gives terraform TFC_RUN_ID in its environment).
func terraformOf(runID string) bool {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte("\x00TFC_RUN_ID="+runID+"\x00")) && !bytes.HasPrefix(env, []byte("TFC_RUN_ID="+runID+"\x00")) {
			continue
		}
		if cmd, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")); err == nil {
			if exe, _, _ := bytes.Cut(cmd, []byte{0}); filepath.Base(string(exe)) == "terraform" {
				return true
			}
		}
	}
	return false
}

// uploadConfig uploads a one-file configuration and waits until it is
// uploaded.
func uploadConfig(ctx context.Context, t testing.TB, c *tfe.Client, wsID, mainTF string) *tfe.ConfigurationVersion {
	t.Helper()
	return testenv.UploadConfig(ctx, t, c, wsID, mainTF)
}

func createRun(ctx context.Context, t testing.TB, c *tfe.Client, wsID, cvID string, vars []*tfe.RunVariable) *tfe.Run {
	t.Helper()
	r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{
		Workspace:            &tfe.Workspace{ID: wsID},
		ConfigurationVersion: &tfe.ConfigurationVersion{ID: cvID},
		AutoApply:            tfe.Bool(true),
		Variables:            vars,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// erroredReason is the description of a run's last "errored" event ("" when
// it has none).
func erroredReason(ctx context.Context, t *testing.T, c *tfe.Client, runID string) string {
	t.Helper()
	return testenv.ErroredReason(ctx, t, c, runID)
}

// waitRun polls a run until it reaches one of the statuses (see
// testenv.WaitRunWithin).
func waitRun(ctx context.Context, t testing.TB, c *tfe.Client, id string, limit time.Duration, want ...tfe.RunStatus) *tfe.Run {
	t.Helper()
	return testenv.WaitRunWithin(ctx, t, c, id, limit, want...)
}

// TestReplicaStartSparesOtherRunners starts a second server process on the
// same database while the first applies a run. The newcomer's start-up
// recovery takes back jobs of its own earlier processes only: the other
// replica's apply goes on.
func TestReplicaStartSparesOtherRunners(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	database := storetest.PostgresDSN(t)
	// Replicas of one database share its key-encryption key and signing
	// secret.
	kek, secret := seal.GenerateKEK().String(), core.RandomString(32)
	a := startProc(t, t.TempDir(), database, "", "--kek", kek, "--secret", secret)
	ctx := mustCtx()
	c := a.Client
	if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app"), ExecutionMode: tfe.String("remote")})
	if err != nil {
		t.Fatal(err)
	}
	cv := uploadConfig(ctx, t, c, ws.ID, slowApplyConfig)
	r := createRun(ctx, t, c, ws.ID, cv.ID, []*tfe.RunVariable{{Key: "sleep", Value: "60"}})
	waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplying)

	// Replica b starts (as after its own restart); its recovery has run
	// by the time it answers /healthz.
	startProc(t, t.TempDir(), database, "", "--kek", kek, "--secret", secret)
	time.Sleep(500 * time.Millisecond)
	got, err := c.Runs.Read(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != tfe.RunApplying {
		events, _ := c.RunEvents.List(ctx, r.ID, nil)
		var why []string
		if events != nil {
			for _, ev := range events.Items {
				why = append(why, ev.Action+": "+ev.Description)
			}
		}
		t.Fatalf("another replica's start turned an applying run %s; events %q", got.Status, why)
	}
	if !terraformOf(r.ID) {
		t.Fatal("terraform of the applying run is gone after another replica started")
	}
}
