package e2e

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestOrganizationRunLimits: what a site admin sets of an organization's
// runs (the admin organizations API) reaches its runs, with real
// terraform on both stores: the organization's own plan timeout stops a
// plan long before the site's (its log says whose limit it was), and
// other organizations keep the site's; without terraform-worker-sudo-enabled
// terraform and the processes it starts run with no_new_privs (the
// kernel's word, /proc/self/status of a local-exec provisioner), and with
// it they do not.
func TestOrganizationRunLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	// The thread's own status: the runner sets no_new_privs on threads
	// of their own, locked to the goroutine that starts terraform (the
	// process's main thread among them, when that goroutine ran there:
	// /proc/self/status may say 1 once a run went before), which no other
	// goroutine runs on.
	if b, err := os.ReadFile("/proc/thread-self/status"); err != nil || !regexp.MustCompile(`NoNewPrivs:\s+0`).Match(b) {
		t.Fatalf("this test needs Linux and a test process that started without no_new_privs (so that a run allowed sudo can be told apart): %v\n%s", err, b)
	}
	t.Parallel()
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			never := hangingURL(t)
			e := testenv.New(t, testenv.Options{Store: st, CancelGrace: 2 * time.Second})
			c := e.Client
			logOf := func(r io.Reader, err error) string { return readAll(t, r, err) }
			ctx := context.Background()
			testenv.NewOrg(t, c, "acme")
			testenv.NewOrg(t, c, "other")
			admin := func(opts tfe.AdminOrganizationUpdateOptions) {
				t.Helper()
				if _, err := c.Admin.Organizations.Update(ctx, "acme", opts); err != nil {
					t.Fatal(err)
				}
			}

			// The site's plan limit stays 2h; acme's own is 3s.
			admin(tfe.AdminOrganizationUpdateOptions{PlanTimeout: tfe.String("3s")})
			slow := `data "terraform_remote_state" "never" {
  backend = "http"
  config = {
    address = "` + never + `/state"
  }
}
`
			start := time.Now()
			r := testenv.WaitRunWithin(ctx, t, c, startRun(ctx, t, c, "acme", "slow-plan", false, slow).ID, 2*time.Minute, tfe.RunErrored)
			plan := logOf(c.Plans.Logs(ctx, r.Plan.ID))
			if !strings.Contains(plan, "The plan has run for the organization's plan timeout of 3s") ||
				!strings.Contains(plan, "Error: the plan was stopped: it reached the organization's plan timeout of 3s") {
				t.Fatalf("the stopped plan's log does not say the organization's plan timeout was reached:\n%s", plan)
			}
			if took := time.Since(start); took > time.Minute {
				t.Errorf("the plan with a 3s limit errored only after %s", took)
			}
			// Another organization's plan runs on under the site's limit:
			// still planning 6s after it started (a run still queued would
			// prove nothing).
			other := testenv.WaitRunWithin(ctx, t, c, startRun(ctx, t, c, "other", "slow-plan", false, slow).ID, time.Minute, tfe.RunPlanning)
			time.Sleep(6 * time.Second)
			if o, err := c.Runs.Read(ctx, other.ID); err != nil || o.Status != tfe.RunPlanning {
				t.Fatalf("another organization's plan 6s after it started: %+v %v", o, err)
			}
			if err := c.Runs.Cancel(ctx, other.ID, tfe.RunCancelOptions{}); err != nil {
				t.Fatal(err)
			}
			testenv.WaitRunWithin(ctx, t, c, other.ID, time.Minute, tfe.RunCanceled, tfe.RunErrored)

			// Sudo: not allowed (the default), then allowed.
			privs := `resource "terraform_data" "privs" {
  provisioner "local-exec" {
    command = "grep NoNewPrivs /proc/self/status"
  }
}
`
			// The log's lines are JSON: the tab is written \t.
			flag := regexp.MustCompile(`\(local-exec\): NoNewPrivs:(?:\s|\\t)+(\d)`)
			for _, sudo := range []bool{false, true} {
				admin(tfe.AdminOrganizationUpdateOptions{TerraformWorkerSudoEnabled: sudo, PlanTimeout: tfe.String("")})
				name, want := "no-sudo", "1"
				if sudo {
					name, want = "sudo", "0"
				}
				r := testenv.WaitRunWithin(ctx, t, c, startRun(ctx, t, c, "acme", name, true, privs).ID, 2*time.Minute, tfe.RunApplied)
				apply := logOf(c.Applies.Logs(ctx, r.Apply.ID))
				m := flag.FindStringSubmatch(apply)
				if m == nil || m[1] != want {
					t.Fatalf("sudo allowed %v: the provisioner's NoNewPrivs is %v, want %s:\n%s", sudo, m, want, apply)
				}
			}
		})
	}
}
