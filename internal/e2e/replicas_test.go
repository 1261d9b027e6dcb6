package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

// replicaRuns is how many runs TestReplicasSurviveKill submits (half to
// each replica); workspaces how many workspaces they spread over.
const (
	replicaRuns       = 20
	replicaWorkspaces = 10
)

// TestReplicasSurviveKill runs two terrace server processes on one
// PostgreSQL database and one S3 bucket (versitygw), with the same KEK and
// secret. Runs are submitted to both at once; when about half have ended,
// the replica that leads the cluster's loops is killed with SIGKILL. Every
// run then ends applied or errored with a reason, none is left stuck,
// every applied run's state version is there and readable from the
// survivor, and the survivor takes the loops over (it says so in
// terrace_cluster_leader).
//
// The agents of issue 14 item 1–2 are not part of this test yet: when
// `terrace agent` exists, start two here and give the workspaces agent
// execution mode.
func TestReplicasSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	database := storetest.PostgresDSN(t)
	s3 := testenv.StartS3(t)
	s3.SetEnv(t) // the server processes inherit the bucket's credentials
	kek := seal.GenerateKEK().String()
	secret := core.RandomString(32)
	flags := []string{"--kek", kek, "--secret", secret, "--blobs", s3.Spec(), "--log-level", "info"}
	reps := []*proc{
		startProc(t, t.TempDir(), database, "", flags...),
		startProc(t, t.TempDir(), database, "", flags...),
	}
	names := make([]string, len(reps))
	for i, p := range reps {
		b, err := os.ReadFile(filepath.Join(p.dataDir, "instance-id"))
		if err != nil {
			t.Fatal(err)
		}
		names[i] = strings.TrimSpace(string(b))
	}
	// Exactly one replica leads (the campaign takes a moment after start).
	leader := waitLeader(t, reps, names, -1)
	t.Logf("replica %d (%s) leads", leader, names[leader])

	ctx := mustCtx()
	c0 := reps[0].Client
	if _, err := c0.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	type target struct{ ws, cv string }
	targets := make([]target, replicaWorkspaces)
	for i := range targets {
		// Each workspace is set up through one replica and used through both.
		c := reps[i%2].Client
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(fmt.Sprintf("app-%d", i)), ExecutionMode: tfe.String("remote")})
		if err != nil {
			t.Fatal(err)
		}
		cv := uploadConfig(ctx, t, c, ws.ID, replicaConfig)
		targets[i] = target{ws.ID, cv.ID}
	}

	// Submit every run at once, half through each replica.
	ids := make([]string, replicaRuns)
	errs := make(chan error, replicaRuns)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tg := targets[i%len(targets)]
			r, err := reps[i%2].Client.Runs.Create(ctx, tfe.RunCreateOptions{
				Workspace: &tfe.Workspace{ID: tg.ws}, ConfigurationVersion: &tfe.ConfigurationVersion{ID: tg.cv},
				AutoApply: tfe.Bool(true),
				Variables: []*tfe.RunVariable{{Key: "n", Value: fmt.Sprint(i)}},
			})
			if err != nil {
				errs <- fmt.Errorf("creating run %d: %w", i, err)
				return
			}
			ids[i] = r.ID
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Kill the leader halfway.
	survivor := 1 - leader
	sc := reps[survivor].Client
	deadline := time.Now().Add(5 * time.Minute)
	for done := 0; done < replicaRuns/2; {
		done = 0
		for _, id := range ids {
			r, err := sc.Runs.Read(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if isFinal(r.Status) {
				done++
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d runs ended within 5 minutes, before any replica was killed", done, replicaRuns)
		}
		time.Sleep(200 * time.Millisecond)
	}
	reps[leader].kill()
	t.Logf("killed replica %d (%s)", leader, names[leader])

	// The survivor takes the loops over.
	if got := waitLeader(t, reps[survivor:survivor+1], names[survivor:survivor+1], 0); got != 0 {
		t.Fatal("the survivor did not take the lead")
	}
	t.Logf("replica %d (%s) took the cluster's loops over", survivor, names[survivor])
	if !strings.Contains(readLog(t, reps[survivor]), "this replica leads the cluster's background loops") {
		t.Fatal("the survivor's log does not say it took the lead")
	}

	// Every run ends (the killed replica's jobs are reaped when their
	// leases expire: 30s), applied or errored with a reason.
	applied := map[string]int{} // workspace → applied runs
	var nApplied, nErrored int
	for i, id := range ids {
		r := waitRun(ctx, t, sc, id, 3*time.Minute, tfe.RunApplied, tfe.RunErrored, tfe.RunCanceled, tfe.RunDiscarded)
		switch r.Status {
		case tfe.RunApplied:
			applied[targets[i%len(targets)].ws]++
			nApplied++
		case tfe.RunErrored:
			nErrored++
			why := erroredReason(ctx, t, sc, id)
			if why == "" {
				t.Fatalf("run %s errored without a reason", id)
			}
			t.Logf("run %s errored: %s", id, why)
		default:
			t.Fatalf("run %s ended %s, want applied or errored", id, r.Status)
		}
	}
	t.Logf("%d runs applied, %d errored", nApplied, nErrored)
	if nApplied < replicaRuns/2 {
		t.Fatalf("only %d of %d runs applied", nApplied, replicaRuns)
	}

	// No state version is lost: every applied run stored one, readable
	// (from the shared bucket) through the survivor; no workspace is left
	// locked.
	for _, tg := range targets {
		list, err := sc.StateVersions.List(ctx, &tfe.StateVersionListOptions{Organization: "acme", Workspace: workspaceName(ctx, t, sc, tg.ws), ListOptions: tfe.ListOptions{PageSize: 100}})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != applied[tg.ws] {
			t.Fatalf("workspace %s has %d state versions for %d applied runs", tg.ws, len(list.Items), applied[tg.ws])
		}
		for _, sv := range list.Items {
			if _, err := sc.StateVersions.Download(ctx, sv.DownloadURL); err != nil {
				t.Fatalf("state version %s cannot be read from the survivor: %v", sv.ID, err)
			}
		}
		if w, err := sc.Workspaces.ReadByID(ctx, tg.ws); err != nil || w.Locked {
			t.Fatalf("workspace %s locked after every run ended (%v)", tg.ws, err)
		}
	}
}

const replicaConfig = `
variable "n" {
  type    = number
  default = 0
}
resource "terraform_data" "app" {
  input = var.n
}
`

// erroredReason is the description of a run's last "errored" event ("" when
// it has none).
func erroredReason(ctx context.Context, t *testing.T, c *tfe.Client, runID string) string {
	t.Helper()
	events, err := c.RunEvents.List(ctx, runID, nil)
	if err != nil {
		t.Fatal(err)
	}
	why := ""
	for _, ev := range events.Items {
		if ev.Action == "errored" {
			why = ev.Description
		}
	}
	return why
}

func isFinal(s tfe.RunStatus) bool {
	switch s {
	case tfe.RunApplied, tfe.RunErrored, tfe.RunCanceled, tfe.RunDiscarded, tfe.RunPlannedAndFinished:
		return true
	}
	return false
}

func workspaceName(ctx context.Context, t *testing.T, c *tfe.Client, id string) string {
	t.Helper()
	w, err := c.Workspaces.ReadByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return w.Name
}

func readLog(t *testing.T, p *proc) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dataDir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitLeader waits until exactly one of reps reports leading in its
// terrace_cluster_leader gauge (want ≥ 0: that one) and returns its index.
func waitLeader(t *testing.T, reps []*proc, names []string, want int) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		leading := -1
		count := 0
		for i, p := range reps {
			if leaderGauge(t, p, names[i]) {
				leading = i
				count++
			}
		}
		if count == 1 && (want < 0 || leading == want) {
			return leading
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute %d replicas lead (want exactly one, replica %d)", count, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leaderGauge reads terrace_cluster_leader{replica=name} from p's /metrics.
func leaderGauge(t *testing.T, p *proc, name string) bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+p.Token)
	resp, err := p.HTTP.Do(req)
	if err != nil {
		t.Fatalf("reading %s/metrics: %v", p.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s/metrics: %d %s", p.URL, resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	series := `terrace_cluster_leader{replica="` + name + `"} `
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series); ok {
			return strings.TrimSpace(v) == "1"
		}
	}
	t.Fatalf("%s/metrics has no %s series", p.URL, series)
	return false
}
