package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestSiteTimeoutsStopRuns: a plan running longer than the site's
// plan-timeout (its remote state read never answers) and an apply running
// longer than apply-timeout (a provisioner that sleeps) are stopped; each
// run errors, its log saying the site's timeout was reached, and the
// other phase's limit does not touch it. Both stores, real terraform.
func TestSiteTimeoutsStopRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
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
			setTimeouts := func(plan, apply string) {
				t.Helper()
				if _, err := c.Admin.Settings.General.Update(ctx, tfe.AdminGeneralSettingsUpdateOptions{PlanTimeout: tfe.String(plan), ApplyTimeout: tfe.String(apply)}); err != nil {
					t.Fatal(err)
				}
			}

			// The plan: 3s, however long the apply may take.
			setTimeouts("3s", "1h")
			start := time.Now()
			r := startRun(ctx, t, c, "acme", "slow-plan", false, `data "terraform_remote_state" "never" {
  backend = "http"
  config = {
    address = "`+never+`/state"
  }
}
`)
			r = testenv.WaitRunWithin(ctx, t, c, r.ID, 2*time.Minute, tfe.RunErrored)
			took := time.Since(start)
			plan := logOf(c.Plans.Logs(ctx, r.Plan.ID))
			if !strings.Contains(plan, "The plan has run for the site's plan timeout of 3s") || !strings.Contains(plan, "Error: the plan was stopped: it reached the site's plan timeout of 3s") {
				t.Fatalf("the stopped plan's log does not say the site's plan timeout was reached:\n%s", plan)
			}
			if took > time.Minute {
				t.Errorf("the plan with a 3s limit errored only after %s", took)
			}

			// The apply: 3s, after a plan that takes what it takes.
			setTimeouts("1h", "3s")
			r = startRun(ctx, t, c, "acme", "slow-apply", true, `resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "sleep 120"
  }
}
`)
			r = testenv.WaitRunWithin(ctx, t, c, r.ID, 2*time.Minute, tfe.RunErrored)
			if p, err := c.Plans.Read(ctx, r.Plan.ID); err != nil || p.Status != tfe.PlanFinished {
				t.Fatalf("the plan before the slow apply: %+v %v", p, err)
			}
			apply := logOf(c.Applies.Logs(ctx, r.Apply.ID))
			if !strings.Contains(apply, "The apply has run for the site's apply timeout of 3s") || !strings.Contains(apply, "Error: the apply was stopped: it reached the site's apply timeout of 3s") {
				t.Fatalf("the stopped apply's log does not say the site's apply timeout was reached:\n%s", apply)
			}
			if why := testenv.ErroredReason(ctx, t, c, r.ID); why != "" && !strings.Contains(why, "apply timeout") {
				t.Errorf("the run's errored event says %q", why)
			}
		})
	}
}

// hangingURL is the address of a server that never answers (until the
// test ends): a remote state read from it runs until a time limit stops
// it.
func hangingURL(t *testing.T) string {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv.URL
}

// startRun creates workspace name of org (auto-apply as said), uploads
// config and starts a run of it.
func startRun(ctx context.Context, t *testing.T, c *tfe.Client, org, name string, autoApply bool, config string) *tfe.Run {
	t.Helper()
	ws, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(name), AutoApply: tfe.Bool(autoApply)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: testenv.UploadConfig(ctx, t, c, ws.ID, config)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
