package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

const twoOutputs = `
variable "cidr" {
  type    = string
  default = "10.0.0.0/16"
}
variable "tag" {
  type    = string
  default = "a"
}
resource "terraform_data" "net" { input = var.cidr }
output "cidr" { value = terraform_data.net.output }
output "tag" { value = var.tag }
`

// TestDerivedEdgeCarriesReadOutputs: net has two outputs and app's
// configuration reads only one of them. The derived edge carries only
// that one; an apply of net that changes only the other starts nothing in
// app, and one that changes the read output does.
func TestDerivedEdgeCarriesReadOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			e := testenv.New(t, testenv.Options{Store: st})
			ctx := context.Background()
			c := e.Client
			testenv.NewOrg(t, c, "acme")
			mk := func(name string) *tfe.Workspace {
				w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name), GlobalRemoteState: tfe.Bool(true), AutoApply: tfe.Bool(true)})
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			net, app := mk("net"), mk("app")
			netCV := uploadConfig(ctx, t, c, net.ID, twoOutputs)
			appCV := uploadConfig(ctx, t, c, app.ID, remoteState(e.Host, "net")+`
resource "terraform_data" "app" { input = data.terraform_remote_state.net.outputs["cidr"] }
`)
			apply := func(ws *tfe.Workspace, cvID string, vars ...*tfe.RunVariable) {
				t.Helper()
				r := createRun(ctx, t, c, ws.ID, cvID, vars)
				if r = waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored, tfe.RunPlannedAndFinished); r.Status != tfe.RunApplied {
					t.Fatalf("run %s in %s ended %s", r.ID, ws.Name, r.Status)
				}
			}
			runs := func() int {
				t.Helper()
				l, err := c.Runs.List(ctx, app.ID, nil)
				if err != nil {
					t.Fatal(err)
				}
				return len(l.Items)
			}
			apply(net, netCV.ID)
			apply(app, appCV.ID)
			edge := findEdge(dependencies(t, e, app.ID), "net", "app")
			if edge == nil || fmt.Sprint(edge.Outputs) != "[cidr]" {
				t.Fatalf("the derived edge net → app: %+v, want it to carry [cidr] only", edge)
			}

			// Only tag changes: nothing runs in app (a negative: it can
			// only wait a while).
			apply(net, netCV.ID, &tfe.RunVariable{Key: "tag", Value: `"b"`})
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
				if n := runs(); n != 1 {
					t.Fatalf("an apply of net that changed only an output app does not read started a run in app (%d runs)", n)
				}
			}

			// cidr changes: app runs.
			apply(net, netCV.ID, &tfe.RunVariable{Key: "cidr", Value: `"10.9.0.0/16"`})
			for deadline := time.Now().Add(2 * time.Minute); runs() < 2; time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("an apply of net that changed cidr started no run in app")
				}
			}
		})
	}
}
