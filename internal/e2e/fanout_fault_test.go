package e2e

import (
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestFanOutSurvivesKill: an apply's fan-out is queued in the store
// (the server holds it with --trigger-hold), the server is killed with
// SIGKILL before it starts the dependent run, and after the restart the
// dependent run is queued and applies.
func TestFanOutSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			database := ""
			if st == "postgres" {
				database = storetest.PostgresDSN(t)
			}
			p := startProc(t, t.TempDir(), database, "", "--trigger-hold", "1h")
			ctx := mustCtx()
			c := p.Client
			if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
				t.Fatal(err)
			}
			src, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("src")})
			if err != nil {
				t.Fatal(err)
			}
			dst, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("dst"), AutoApplyRunTrigger: tfe.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.RunTriggers.Create(ctx, dst.ID, tfe.RunTriggerCreateOptions{Sourceable: src}); err != nil {
				t.Fatal(err)
			}
			uploadConfig(ctx, t, c, dst.ID, `resource "terraform_data" "d" { input = "d" }`)
			cv := uploadConfig(ctx, t, c, src.ID, `resource "terraform_data" "s" { input = "s" }`)
			r := createRun(ctx, t, c, src.ID, cv.ID, nil)
			waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied)
			dstRuns := func(c *tfe.Client) []*tfe.Run {
				t.Helper()
				l, err := c.Runs.List(ctx, dst.ID, nil)
				if err != nil {
					t.Fatal(err)
				}
				return l.Items
			}
			// Held: no dependent run yet (a negative: it can only wait).
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
				if n := len(dstRuns(c)); n != 0 {
					t.Fatalf("dst has %d runs while the fan-out is held", n)
				}
			}
			p.kill()

			p = startProc(t, p.DataDir, p.Database, p.Addr)
			c = p.Client
			var got []*tfe.Run
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
				if got = dstRuns(c); len(got) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("after the restart the queued fan-out never started dst's run")
				}
			}
			if len(got) != 1 || !strings.Contains(got[0].Message, r.ID) {
				t.Fatalf("dst's runs after the restart: %d, message %q; want one naming %s", len(got), got[0].Message, r.ID)
			}
			waitRun(ctx, t, c, got[0].ID, 3*time.Minute, tfe.RunApplied)
		})
	}
}
