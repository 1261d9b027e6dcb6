package replicas_test

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
// each replica); workspaces how many workspaces they spread over (every
// other one in agent execution mode).
const (
	replicaRuns       = 100
	replicaWorkspaces = 25
	// replicaLease is the replicas' --job-heartbeat-timeout: how soon the
	// killed replica's jobs (and those of the agent that talked to it)
	// are taken back.
	replicaLease = 5 * time.Second
)

// TestReplicasSurviveKill runs two terrace server processes on one
// PostgreSQL database and one S3 bucket (versitygw), with the same KEK and
// secret, and two `terrace agent` processes (one talking to each replica,
// as behind two addresses). Half the workspaces run on the agents, half on
// the replicas' own runners. Runs are submitted to both replicas at once;
// when about half have ended, the replica that leads the cluster's loops
// is killed with SIGKILL. Every run then ends applied or errored with a
// reason, none is left stuck, every applied run's state version is there
// and readable from the survivor, no workspace stays locked, and the
// survivor takes the loops over (it says so in terrace_cluster_leader).
// The agent of the killed replica is left without a server; the other one
// runs the agent workspaces' remaining runs.
func TestReplicasSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	testenv.Engines(t)
	database := storetest.PostgresDSN(t)
	s3 := testenv.StartS3(t)
	s3.SetEnv(t) // the server processes inherit the bucket's credentials
	kek := seal.GenerateKEK().String()
	secret := core.RandomString(32)
	flags := []string{"--kek", kek, "--secret", secret, "--blobs", s3.Spec(), "--log-level", "info",
		"--job-heartbeat-timeout", replicaLease.String()}
	reps := make([]*testenv.Process, 2)
	var wg sync.WaitGroup
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i] = testenv.StartProcess(t, t.TempDir(), database, "", flags...)
		}()
	}
	wg.Wait()
	for _, p := range reps {
		if p == nil {
			t.FailNow() // startProc said why
		}
	}
	names := make([]string, len(reps))
	for i, p := range reps {
		b, err := os.ReadFile(filepath.Join(p.DataDir, "instance-id"))
		if err != nil {
			t.Fatal(err)
		}
		names[i] = strings.TrimSpace(string(b))
	}
	// Exactly one replica leads (the campaign takes a moment after start).
	leader := waitLeader(t, reps, names, -1)
	t.Logf("replica %d (%s) leads", leader, names[leader])

	ctx := context.Background()
	c0 := reps[0].Client
	if _, err := c0.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	pool, err := c0.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("private")})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c0.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("replicas")})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range reps {
		testenv.StartAgent(t, p, tok.Token, fmt.Sprintf("agent-%d", i), "--concurrency", "4")
	}
	type target struct{ ws, cv string }
	targets := make([]target, replicaWorkspaces)
	setup := make(chan error, replicaWorkspaces)
	for i := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each workspace is set up through one replica and used
			// through both.
			c := reps[i%2].Client
			o := tfe.WorkspaceCreateOptions{Name: tfe.String(fmt.Sprintf("app-%d", i)), ExecutionMode: tfe.String("remote")}
			if i%2 == 0 {
				o.ExecutionMode, o.AgentPoolID = tfe.String("agent"), tfe.String(pool.ID)
			}
			ws, err := c.Workspaces.Create(ctx, "acme", o)
			if err != nil {
				setup <- err
				return
			}
			cv := testenv.UploadConfig(ctx, t, c, ws.ID, replicaConfig)
			targets[i] = target{ws.ID, cv.ID}
		}()
	}
	wg.Wait()
	close(setup)
	for err := range setup {
		t.Fatal(err)
	}

	// Submit every run at once, half through each replica (50 requests
	// at once each: more than a replica's PostgreSQL pool of 32
	// connections, which once made run creations wait for each other until
	// they timed out).
	start := time.Now()
	ids := make([]string, replicaRuns)
	errs := make(chan error, replicaRuns)
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
	t.Logf("%d runs submitted in %s", replicaRuns, time.Since(start).Round(time.Millisecond))

	// Kill the leader halfway.
	survivor := 1 - leader
	sc := reps[survivor].Client
	ended := waitRunsEnded(ctx, t, sc, replicaRuns/2, 5*time.Minute)
	reps[leader].Kill()
	t.Logf("killed replica %d (%s) with %d of %d runs ended, %s after submitting", leader, names[leader], ended, replicaRuns, time.Since(start).Round(time.Millisecond))

	// The survivor takes the loops over.
	if got := waitLeader(t, reps[survivor:survivor+1], names[survivor:survivor+1], 0); got != 0 {
		t.Fatal("the survivor did not take the lead")
	}
	t.Logf("replica %d (%s) took the cluster's loops over", survivor, names[survivor])
	if !strings.Contains(reps[survivor].Log(t), "this replica leads the cluster's background loops") {
		t.Fatal("the survivor's log does not say it took the lead")
	}

	// Every run ends (the jobs of the killed replica and of its agent are
	// taken back when their leases expire), applied or errored with a
	// reason.
	waitRunsEnded(ctx, t, sc, replicaRuns, 5*time.Minute)
	t.Logf("every run ended %s after submitting", time.Since(start).Round(time.Millisecond))
	applied := map[string][]string{} // workspace → its applied runs
	var nApplied, nErrored int
	for i, id := range ids {
		r, err := sc.Runs.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch r.Status {
		case tfe.RunApplied:
			ws := targets[i%len(targets)].ws
			applied[ws] = append(applied[ws], id)
			nApplied++
		case tfe.RunErrored:
			nErrored++
			why := testenv.ErroredReason(ctx, t, sc, id)
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
		byRun := map[string]bool{}
		for _, sv := range list.Items {
			if sv.Run != nil {
				byRun[sv.Run.ID] = true
			}
			if _, err := sc.StateVersions.Download(ctx, sv.DownloadURL); err != nil {
				t.Fatalf("state version %s cannot be read from the survivor: %v", sv.ID, err)
			}
		}
		for _, id := range applied[tg.ws] {
			if !byRun[id] {
				t.Fatalf("applied run %s of workspace %s has no state version", id, tg.ws)
			}
		}
		if w, err := sc.Workspaces.ReadByID(ctx, tg.ws); err != nil || w.Locked {
			t.Fatalf("workspace %s locked after every run ended (%v)", tg.ws, err)
		}
	}
}

// waitRunsEnded waits until at least n runs of organization acme have
// ended and returns how many have; one list call per look.
func waitRunsEnded(ctx context.Context, t *testing.T, c *tfe.Client, n int, limit time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		done, total := 0, 0
		for page := 1; page > 0; {
			list, err := c.Runs.ListForOrganization(ctx, "acme", &tfe.RunListForOrganizationOptions{ListOptions: tfe.ListOptions{PageNumber: page, PageSize: 100}})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range list.Items {
				total++
				if isFinal(r.Status) {
					done++
				}
			}
			page = 0
			if list.PaginationNextPrev != nil {
				page = list.NextPage
			}
		}
		if done >= n {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d runs ended within %s (want %d)", done, total, limit, n)
		}
		time.Sleep(200 * time.Millisecond)
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

// waitLeader waits until exactly one of reps reports leading in its
// terrace_cluster_leader gauge (want ≥ 0: that one) and returns its index.
func waitLeader(t *testing.T, reps []*testenv.Process, names []string, want int) int {
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
func leaderGauge(t *testing.T, p *testenv.Process, name string) bool {
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
