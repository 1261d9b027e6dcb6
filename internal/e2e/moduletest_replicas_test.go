package e2e

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestModuleTestsWakeEveryReplica: a test run queued on a replica whose
// executor is busy is run by another replica's idle executor, woken by
// the cluster's bell (PostgreSQL's NOTIFY): the executors' own poll is an
// hour here, so nothing else could start it. The replicas share a
// PostgreSQL database and an S3 bucket (versitygw), as replicas must.
func TestModuleTestsWakeEveryReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	ctx := context.Background()
	s3 := testenv.StartS3(t)
	s3.SetEnv(t) // the replicas share the bucket: one uploads, the other reads
	slowPoll := func(c *server.Config) { c.ModuleTestPoll, c.Blobs = time.Hour, s3.Spec() }
	a := testenv.New(t, testenv.Options{Store: "postgres", Configure: slowPoll})
	bo := testenv.ReplicaOf(t, a)
	bo.Configure = slowPoll
	b := testenv.New(t, bo)

	const org = "acme"
	testenv.NewOrg(t, a.Client, org)
	id := testenv.EnableModuleTests(ctx, t, a.Client, org, "greeter", "null")

	// One replica's executor (one run at a time) takes a test that sleeps.
	slow := startSlowTestRun(ctx, t, a, id)
	var runnerID string
	if err := a.Server.DB.QueryRow(ctx, `SELECT runner_id FROM module_test_runs WHERE id = ?`, slow.ID).Scan(&runnerID); err != nil {
		t.Fatal(err)
	}
	busy, idle := a, b
	if strings.Contains(runnerID, "-"+b.Server.Replica+"-") {
		busy, idle = b, a
	} else if !strings.Contains(runnerID, "-"+a.Server.Replica+"-") {
		t.Fatalf("the slow test run's executor %q names neither replica (%s, %s)", runnerID, a.Server.Replica, b.Server.Replica)
	}
	t.Logf("replica %s runs the slow test; replica %s is idle", busy.Server.Replica, idle.Server.Replica)

	// A run queued through the busy replica: only the idle one can take it.
	quick := testenv.StartTestRun(ctx, t, busy.Client, id, map[string]string{
		"main.tf":               testedModule["main.tf"],
		"tests/pass.tftest.hcl": strings.Replace(testedModule["tests/pass.tftest.hcl"], "run \"greets\" {", "run \"greets\" {\n  variables {\n    name = \"world\"\n  }", 1),
	})
	if r := testenv.WaitTestRun(ctx, t, idle.Client, id, quick.ID); r.Status != tfe.TestRunFinished || r.TestStatus != tfe.TestPass {
		t.Fatalf("the test run queued on the busy replica: %s, %s (want finished, pass)", r.Status, r.TestStatus)
	}
	if r, err := busy.Client.TestRuns.Read(ctx, id, slow.ID); err != nil || r.Status != tfe.TestRunRunning {
		logs, _ := busy.Client.TestRuns.Logs(ctx, id, slow.ID)
		if logs != nil {
			b, _ := io.ReadAll(logs)
			t.Logf("its log:\n%s", b)
		}
		t.Fatalf("the slow test run: %+v, %v (want still running: the busy replica did not take the other run)", r, err)
	}
	if err := a.Client.TestRuns.ForceCancel(ctx, id, slow.ID); err != nil {
		t.Fatal(err)
	}
	testenv.WaitTestRun(ctx, t, a.Client, id, slow.ID)
}
