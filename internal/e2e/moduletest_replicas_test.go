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
	id := tfe.RegistryModuleID{Organization: org, Name: "greeter", Provider: "null", Namespace: org, RegistryName: tfe.PrivateRegistry}
	if _, err := a.Client.RegistryModules.Create(ctx, org, tfe.RegistryModuleCreateOptions{Name: tfe.String(id.Name), Provider: tfe.String(id.Provider)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Client.RegistryModules.Update(ctx, id, tfe.RegistryModuleUpdateOptions{TestConfig: &tfe.RegistryModuleTestConfigOptions{TestsEnabled: tfe.Bool(true)}}); err != nil {
		t.Fatal(err)
	}

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
	quick := createTestRun(ctx, t, busy, id, map[string][]byte{
		"main.tf":               []byte(testedModule["main.tf"]),
		"tests/pass.tftest.hcl": []byte(strings.Replace(testedModule["tests/pass.tftest.hcl"], "run \"greets\" {", "run \"greets\" {\n  variables {\n    name = \"world\"\n  }", 1)),
	})
	if r := waitTestRun(ctx, t, idle, id, quick.ID); r.Status != tfe.TestRunFinished || r.TestStatus != tfe.TestPass {
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
	waitTestRun(ctx, t, a, id, slow.ID)
}
