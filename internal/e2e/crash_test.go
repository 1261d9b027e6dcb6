package e2e

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

const crashConfig = `
variable "name" {
  type    = string
  default = "none"
}
resource "terraform_data" "app" {
  input = var.name
}
output "name" { value = terraform_data.app.output }
`

// TestCrashTrials kills a real server process with SIGKILL at a random
// moment while it is busy with an API-driven apply, a state upload
// through the state-versions API, a configuration upload and a terraform
// apply with a cloud block (which pushes its state), restarts it, and
// checks what survived: every state version a client saw finalized is
// still there and downloads whole with its hash; no finalized version is
// half-written; every run ends; a workspace is locked only by a user who
// took the lock or by a run still going. 20 trials per store (set
// TERRACE_CRASH_TRIALS for more or fewer); the kill points come from a
// seed that is printed and can be given back with TERRACE_CRASH_SEED.
func TestCrashTrials(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	eng := engines(t)[0]
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TERRACE_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("TERRACE_CRASH_SEED=%q is not a number", s)
		}
	}
	trials := 20
	if s := os.Getenv("TERRACE_CRASH_TRIALS"); s != "" {
		var err error
		if trials, err = strconv.Atoi(s); err != nil || trials < 1 {
			t.Fatalf("TERRACE_CRASH_TRIALS=%q is not a positive number", s)
		}
	}
	t.Logf("crash trials: seed %d (rerun with TERRACE_CRASH_SEED=%d), %d trials per store", seed, seed, trials)
	for i, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			database := ""
			if st == "postgres" {
				database = storetest.PostgresDSN(t)
			}
			ct := newCrashTrials(t, database, eng, rand.New(rand.NewPCG(seed, uint64(i))))
			for n := range trials {
				ct.trial(n)
				if t.Failed() {
					t.Fatalf("trial %d failed (seed %d)", n, seed)
				}
			}
		})
	}
}

// crashTrials is one store's sequence of trials on one data dir.
type crashTrials struct {
	t   *testing.T
	p   *proc
	rng *rand.Rand
	cli *cli
	dir string // the cloud-block configuration terraform applies

	runsWS, apiWS, cliWS, cfgWS *tfe.Workspace
	runsCV                      *tfe.ConfigurationVersion

	mu sync.Mutex
	// What clients saw succeed, across all trials.
	states     map[string]string // finalized state version ID → MD5
	apiSerial  int64             // highest serial uploaded (answered or not)
	apiSeen    int64             // highest serial a client saw finalized
	cliApplied string            // name of the last terraform apply that exited 0
	runs       []string
	configs    map[string][]byte // uploaded configuration version ID → archive
	kills      []time.Duration
}

const crashOrg = "acme"

func newCrashTrials(t *testing.T, database string, eng testenv.Engine, rng *rand.Rand) *crashTrials {
	ct := &crashTrials{t: t, rng: rng, states: map[string]string{}, configs: map[string][]byte{}}
	ct.p = startProc(t, t.TempDir(), database, "")
	ctx := mustCtx()
	c := ct.p.Client
	if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(crashOrg), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	mk := func(name, mode string) *tfe.Workspace {
		ws, err := c.Workspaces.Create(ctx, crashOrg, tfe.WorkspaceCreateOptions{Name: tfe.String(name), ExecutionMode: tfe.String(mode)})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	ct.runsWS, ct.apiWS, ct.cliWS, ct.cfgWS = mk("runs", "remote"), mk("api", "local"), mk("cli", "local"), mk("cfg", "remote")
	ct.runsCV = uploadConfig(ctx, t, c, ct.runsWS.ID, crashConfig)

	// terraform with a cloud block on the cli workspace (local execution:
	// terraform applies here and pushes the state).
	home := t.TempDir()
	host := strings.TrimPrefix(ct.p.URL, "https://")
	rc := filepath.Join(home, "terraform.rc")
	if err := os.WriteFile(rc, fmt.Appendf(nil, "credentials %q {\n  token = %q\n}\n", host, ct.p.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	ct.cli = &cli{t: t, bin: eng.Path, eng: eng, host: host, env: append(os.Environ(),
		"TF_CLI_CONFIG_FILE="+rc, "SSL_CERT_FILE="+filepath.Join(ct.p.DataDir, "tls", "ca.pem"),
		"TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_INPUT=0", "HOME="+home)}
	ct.dir = writeConfig(t, map[string]string{"main.tf": cloudBlock(host, crashOrg, "cli") + crashConfig})
	ct.cli.run(ct.dir, "init")
	return ct
}

// trial starts the four kinds of work, kills the server at a random
// moment, restarts it, lets the clients finish, and checks.
func (ct *crashTrials) trial(n int) {
	t := ct.t
	ctx := mustCtx()
	c := ct.p.Client
	name := fmt.Sprintf("trial-%d", n)
	// A crash mid-upload may leave the api workspace locked by the user
	// who locked it (which is consistent); the next upload takes it back.
	if ws, err := c.Workspaces.ReadByID(ctx, ct.apiWS.ID); err == nil && ws.Locked {
		if _, err := c.Workspaces.Unlock(ctx, ct.apiWS.ID); err != nil {
			t.Errorf("trial %d: unlocking the api workspace: %v", n, err)
		}
	}
	if ws, err := c.Workspaces.ReadByID(ctx, ct.cliWS.ID); err == nil && ws.Locked {
		if _, err := c.Workspaces.ForceUnlock(ctx, ct.cliWS.ID); err != nil {
			t.Errorf("trial %d: unlocking the cli workspace: %v", n, err)
		}
	}

	// Every random choice is drawn here, in order, so a seed replays.
	stateSize := 64<<10 + ct.rng.IntN(512<<10)
	cfgPad := 1 + ct.rng.IntN(20000)
	kill := time.Duration(ct.rng.Int64N(int64(6 * time.Second)))

	var wg sync.WaitGroup
	work := func(fn func()) { wg.Add(1); go func() { defer wg.Done(); fn() }() }
	// An API-driven run that plans and auto-applies.
	work(func() {
		r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ct.runsWS, ConfigurationVersion: ct.runsCV, AutoApply: tfe.Bool(true),
			Variables: []*tfe.RunVariable{{Key: "name", Value: strconv.Quote(name)}}})
		if err == nil {
			ct.mu.Lock()
			ct.runs = append(ct.runs, r.ID)
			ct.mu.Unlock()
		}
	})
	// A state upload through the state-versions API, under a user lock.
	work(func() {
		ct.mu.Lock()
		ct.apiSerial++
		serial := ct.apiSerial
		ct.mu.Unlock()
		doc := stateDoc("crash-api-lineage", serial, stateSize)
		sum := md5.Sum(doc)
		if _, err := c.Workspaces.Lock(ctx, ct.apiWS.ID, tfe.WorkspaceLockOptions{Reason: tfe.String(name)}); err != nil {
			return
		}
		sv, err := c.StateVersions.Upload(ctx, ct.apiWS.ID, tfe.StateVersionUploadOptions{
			StateVersionCreateOptions: tfe.StateVersionCreateOptions{Serial: tfe.Int64(serial), Lineage: tfe.String("crash-api-lineage"), MD5: tfe.String(hex.EncodeToString(sum[:]))},
			RawState:                  doc,
		})
		if err != nil {
			return
		}
		// Upload returns once the upload was accepted; the version is
		// final when a read says so.
		if sv, err = c.StateVersions.Read(ctx, sv.ID); err == nil && sv.Status == tfe.StateVersionFinalized {
			ct.mu.Lock()
			ct.states[sv.ID] = hex.EncodeToString(sum[:])
			ct.apiSeen = max(ct.apiSeen, serial)
			ct.mu.Unlock()
		}
		_, _ = c.Workspaces.Unlock(ctx, ct.apiWS.ID)
	})
	// A configuration upload.
	work(func() {
		dir := filepath.Join(t.TempDir(), "cfg")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Error(err)
			return
		}
		pad := strings.Repeat("# "+name+"\n", cfgPad)
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(crashConfig+pad), 0o644); err != nil {
			t.Error(err)
			return
		}
		archive, err := slug.Pack(dir)
		if err != nil {
			t.Error(err)
			return
		}
		cv, err := c.ConfigurationVersions.Create(ctx, ct.cfgWS.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
		if err != nil {
			return
		}
		if err := c.ConfigurationVersions.UploadTarGzip(ctx, cv.UploadURL, bytes.NewReader(archive)); err != nil {
			return
		}
		if cv, err = c.ConfigurationVersions.Read(ctx, cv.ID); err == nil && cv.Status == tfe.ConfigurationUploaded {
			ct.mu.Lock()
			ct.configs[cv.ID] = archive
			ct.mu.Unlock()
		}
	})
	// terraform apply with a cloud block: it locks the workspace, applies
	// here and pushes the new state.
	work(func() {
		if _, _, err := ct.cli.try(ct.dir, "apply", "-auto-approve", "-lock-timeout=0s", "-var", "name="+name); err == nil {
			ct.mu.Lock()
			ct.cliApplied = name
			ct.mu.Unlock()
		}
	})

	ct.kills = append(ct.kills, kill)
	start := time.Now()
	time.Sleep(kill)
	ct.p.kill()
	ct.p = ct.p.restart()
	restarted := time.Now()
	wg.Wait()
	settled := time.Now()
	ct.check(n)
	t.Logf("trial %d: killed after %s; restart %s, clients done %s later, checks %s", n, kill.Round(time.Millisecond),
		restarted.Sub(start.Add(kill)).Round(time.Millisecond), settled.Sub(restarted).Round(time.Millisecond), time.Since(settled).Round(time.Millisecond))
}

// finalRun reports whether a run has ended.
func finalRun(s tfe.RunStatus) bool {
	switch s {
	case tfe.RunApplied, tfe.RunPlannedAndFinished, tfe.RunErrored, tfe.RunCanceled, tfe.RunDiscarded:
		return true
	}
	return false
}

func (ct *crashTrials) check(n int) {
	t := ct.t
	ctx := mustCtx()
	c := ct.p.Client
	errorf := func(format string, args ...any) {
		t.Helper()
		t.Errorf("trial %d (killed after %s): %s", n, ct.kills[n].Round(time.Millisecond), fmt.Sprintf(format, args...))
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()

	// No run stuck: every run ends within a bounded wait, those whose
	// creation the client never heard of too.
	ids := map[string]bool{}
	for _, id := range ct.runs {
		ids[id] = true
	}
	for _, ws := range []*tfe.Workspace{ct.runsWS, ct.cfgWS} {
		list, err := c.Runs.List(ctx, ws.ID, &tfe.RunListOptions{ListOptions: tfe.ListOptions{PageSize: 100}})
		if err != nil {
			errorf("listing %s's runs: %v", ws.Name, err)
			continue
		}
		for _, r := range list.Items {
			ids[r.ID] = true
		}
	}
	for id := range ids {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			r, err := c.Runs.Read(ctx, id)
			if err != nil {
				errorf("reading run %s: %v", id, err)
				break
			}
			if finalRun(r.Status) {
				break
			}
			if time.Now().After(deadline) {
				errorf("run %s is still %s 2 minutes after the restart", id, r.Status)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// No finalized state version lost, none half-written visible.
	for id, sum := range ct.states {
		sv, err := c.StateVersions.Read(ctx, id)
		if err != nil || sv.Status != tfe.StateVersionFinalized {
			errorf("state version %s, seen finalized before, now reads %v, %v", id, sv, err)
			continue
		}
		b, err := c.StateVersions.Download(ctx, sv.DownloadURL)
		if got := md5.Sum(b); err != nil || hex.EncodeToString(got[:]) != sum {
			errorf("state version %s downloads %d bytes (%v) whose MD5 is not the uploaded %s", id, len(b), err, sum)
		}
	}
	for _, ws := range []*tfe.Workspace{ct.apiWS, ct.cliWS, ct.runsWS} {
		list, err := c.StateVersions.List(ctx, &tfe.StateVersionListOptions{Organization: crashOrg, Workspace: ws.Name, ListOptions: tfe.ListOptions{PageSize: 100}})
		if err != nil {
			errorf("listing %s's state versions: %v", ws.Name, err)
			continue
		}
		for _, sv := range list.Items {
			if sv.Status != tfe.StateVersionFinalized {
				continue
			}
			b, err := c.StateVersions.Download(ctx, sv.DownloadURL)
			var doc struct {
				Serial  int64  `json:"serial"`
				Lineage string `json:"lineage"`
			}
			if err != nil || json.Unmarshal(b, &doc) != nil || doc.Serial != sv.Serial {
				errorf("finalized state version %s of %s is half-written: %d bytes, %v, serial %d (listed %d)", sv.ID, ws.Name, len(b), err, doc.Serial, sv.Serial)
			}
		}
		cur, err := c.StateVersions.ReadCurrent(ctx, ws.ID)
		switch {
		case errors.Is(err, tfe.ErrResourceNotFound):
			if ws == ct.apiWS && ct.apiSeen > 0 || ws == ct.cliWS && ct.cliApplied != "" {
				errorf("%s has no current state after a finalized upload", ws.Name)
			}
		case err != nil:
			errorf("reading %s's current state: %v", ws.Name, err)
		case ws == ct.apiWS && cur.Serial < ct.apiSeen:
			errorf("the api workspace's current state has serial %d, below the finalized %d", cur.Serial, ct.apiSeen)
		}
	}

	// Uploaded configurations stay uploaded and whole; a broken one is
	// never shown as uploaded.
	cvs, err := c.ConfigurationVersions.List(ctx, ct.cfgWS.ID, &tfe.ConfigurationVersionListOptions{ListOptions: tfe.ListOptions{PageSize: 100}})
	if err != nil {
		errorf("listing configuration versions: %v", err)
	} else {
		listed := map[string]bool{}
		for _, cv := range cvs.Items {
			if cv.Status != tfe.ConfigurationUploaded {
				continue
			}
			listed[cv.ID] = true
			b, err := c.ConfigurationVersions.Download(ctx, cv.ID)
			if err != nil {
				errorf("uploaded configuration version %s does not download: %v", cv.ID, err)
				continue
			}
			if want, ok := ct.configs[cv.ID]; ok && !bytes.Equal(b, want) {
				errorf("configuration version %s downloads %d bytes, not the %d uploaded", cv.ID, len(b), len(want))
			}
			if err := slug.Unpack(bytes.NewReader(b), t.TempDir(), slug.Limits{}); err != nil {
				errorf("uploaded configuration version %s does not unpack: %v", cv.ID, err)
			}
		}
		for id := range ct.configs {
			if !listed[id] {
				errorf("configuration version %s, seen uploaded before, is no longer uploaded", id)
			}
		}
	}

	// Locks: a workspace is locked only by a user (who took the lock and
	// was cut off) or by a run that has not ended; every run has ended.
	for _, ws := range []*tfe.Workspace{ct.runsWS, ct.apiWS, ct.cliWS, ct.cfgWS} {
		w, err := c.Workspaces.ReadWithOptions(ctx, crashOrg, ws.Name, &tfe.WorkspaceReadOptions{Include: []tfe.WSIncludeOpt{tfe.WSLockedBy}})
		if err != nil {
			errorf("reading %s: %v", ws.Name, err)
			continue
		}
		if !w.Locked {
			continue
		}
		switch {
		case w.LockedBy == nil:
			errorf("%s is locked by nobody", ws.Name)
		case w.LockedBy.Run != nil:
			errorf("%s is still locked by run %s after every run ended", ws.Name, w.LockedBy.Run.ID)
		case ws == ct.runsWS || ws == ct.cfgWS:
			errorf("%s is locked by %+v, though nobody locked it", ws.Name, w.LockedBy)
		}
	}
}
