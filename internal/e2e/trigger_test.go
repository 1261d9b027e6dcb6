package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestRunTriggerQueuesRun: an apply in a source workspace queues one run
// in the target, which says where it came from and auto-applies because
// the target sets auto-apply-run-trigger; a trigger back from the target
// to the source would close a cycle and is refused. In the diamond
// net → app → dns, net → dns, one apply of net queues dns once.
func TestRunTriggerQueuesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			testRunTriggerQueuesRun(t, testenv.New(t, testenv.Options{Store: st}))
		})
	}
}

func testRunTriggerQueuesRun(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	c := e.Client
	if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	net, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("net")})
	if err != nil {
		t.Fatal(err)
	}
	app, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app"), AutoApplyRunTrigger: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := c.RunTriggers.Create(ctx, app.ID, tfe.RunTriggerCreateOptions{Sourceable: net})
	if err != nil {
		t.Fatal(err)
	}
	if rt.SourceableName != "net" || rt.WorkspaceName != "app" {
		t.Fatalf("run trigger names: %+v", rt)
	}
	if _, err := c.RunTriggers.Create(ctx, net.ID, tfe.RunTriggerCreateOptions{Sourceable: app}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("a trigger closing a cycle: %v, want it refused naming the cycle", err)
	}
	out, err := c.RunTriggers.List(ctx, net.ID, &tfe.RunTriggerListOptions{RunTriggerType: tfe.RunTriggerOutbound})
	if err != nil || len(out.Items) != 1 || out.Items[0].ID != rt.ID {
		t.Fatalf("outbound triggers of net: %+v %v", out, err)
	}
	dns, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("dns"), AutoApplyRunTrigger: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []*tfe.Workspace{net, app} {
		if _, err := c.RunTriggers.Create(ctx, dns.ID, tfe.RunTriggerCreateOptions{Sourceable: src}); err != nil {
			t.Fatal(err)
		}
	}
	uploadConfig(ctx, t, c, dns.ID, `resource "terraform_data" "dns" { input = "x" }`)

	uploadConfig(ctx, t, c, app.ID, `resource "terraform_data" "app" { input = "x" }`)
	cv := uploadConfig(ctx, t, c, net.ID, `resource "terraform_data" "net" { input = "x" }`)
	r := createRun(ctx, t, c, net.ID, cv.ID, nil)
	waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied)

	var triggered *tfe.Run
	for deadline := time.Now().Add(30 * time.Second); triggered == nil; time.Sleep(50 * time.Millisecond) {
		runs, err := c.Runs.List(ctx, app.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs.Items) > 1 {
			t.Fatalf("one apply queued %d runs in app", len(runs.Items))
		}
		if len(runs.Items) == 1 {
			triggered = runs.Items[0]
		}
		if time.Now().After(deadline) {
			t.Fatal("no run was queued in app after net applied")
		}
	}
	if triggered.Source != "tfe-run-trigger" || triggered.TriggerReason != "run_trigger" ||
		!strings.Contains(triggered.Message, `"net"`) || !strings.Contains(triggered.Message, r.ID) {
		t.Fatalf("the triggered run does not name its source: source %q, reason %q, message %q", triggered.Source, triggered.TriggerReason, triggered.Message)
	}
	waitRun(ctx, t, c, triggered.ID, 3*time.Minute, tfe.RunApplied)
	// dns was queued by net's apply; app's triggered apply, from the same
	// origin, does not queue it again.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		runs, err := c.Runs.List(ctx, dns.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs.Items) != 1 {
			t.Fatalf("dns has %d runs after one apply of net, want 1", len(runs.Items))
		}
	}
}
