package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestDerivedDependencies: workspaces net → app → dns, each reading the
// previous one's outputs through terraform_remote_state, with no run
// trigger declared. The real terraform CLI runs every plan and apply.
func TestDerivedDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			testDerivedDependencies(t, testenv.New(t, testenv.Options{Store: st}))
		})
	}
}

const netConfig = `
variable "cidr" {
  type    = string
  default = "10.0.0.0/16"
}
variable "tag" {
  type    = string
  default = "a"
}
resource "terraform_data" "net" { input = var.cidr }
resource "terraform_data" "tag" { input = var.tag }
output "cidr" { value = terraform_data.net.output }
`

func remoteState(host, name string) string {
	return fmt.Sprintf(`
data "terraform_remote_state" %q {
  backend = "remote"
  config = {
    hostname     = %q
    organization = "acme"
    workspaces   = { name = %q }
  }
}
`, name, host, name)
}

type depEdge struct {
	Kind, Producer, Consumer string
	Outputs                  []string
	Cycle                    bool
}

func dependencies(t *testing.T, e *testenv.Env, wsID string) []depEdge {
	t.Helper()
	req, _ := http.NewRequest("GET", e.URL+"/api/v2/workspaces/"+wsID+"/dependencies", nil)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var doc struct {
		Data []struct {
			Attributes struct {
				Kind     string   `json:"kind"`
				Producer string   `json:"producer-name"`
				Consumer string   `json:"consumer-name"`
				Outputs  []string `json:"outputs"`
				Cycle    bool     `json:"cycle"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("dependencies of %s: %d %v: %s", wsID, resp.StatusCode, err, raw)
	}
	var out []depEdge
	for _, d := range doc.Data {
		a := d.Attributes
		out = append(out, depEdge{a.Kind, a.Producer, a.Consumer, a.Outputs, a.Cycle})
	}
	return out
}

func findEdge(edges []depEdge, producer, consumer string) *depEdge {
	for i := range edges {
		if edges[i].Kind == "derived" && edges[i].Producer == producer && edges[i].Consumer == consumer {
			return &edges[i]
		}
	}
	return nil
}

func testDerivedDependencies(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	c := e.Client
	if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	mk := func(name string) *tfe.Workspace {
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name), GlobalRemoteState: tfe.Bool(true), AutoApply: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	net, app, dns := mk("net"), mk("app"), mk("dns")
	appConfig := remoteState(e.Host, "net") + `
resource "terraform_data" "app" { input = data.terraform_remote_state.net.outputs.cidr }
output "subnet" { value = "app-${terraform_data.app.output}" }
`
	dnsConfig := remoteState(e.Host, "app") + `
resource "terraform_data" "dns" { input = data.terraform_remote_state.app.outputs.subnet }
output "record" { value = "dns-${terraform_data.dns.output}" }
`
	netCV := uploadConfig(ctx, t, c, net.ID, netConfig)
	appCV := uploadConfig(ctx, t, c, app.ID, appConfig)
	dnsCV := uploadConfig(ctx, t, c, dns.ID, dnsConfig)
	apply := func(ws *tfe.Workspace, cvID string, vars ...*tfe.RunVariable) {
		t.Helper()
		r := createRun(ctx, t, c, ws.ID, cvID, vars)
		if r = waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored, tfe.RunPlannedAndFinished); r.Status != tfe.RunApplied {
			t.Fatalf("run %s in %s ended %s", r.ID, ws.Name, r.Status)
		}
	}
	apply(net, netCV.ID)
	apply(app, appCV.ID)
	apply(dns, dnsCV.ID)

	edges := dependencies(t, e, app.ID)
	if e1, e2 := findEdge(edges, "net", "app"), findEdge(edges, "app", "dns"); e1 == nil || e2 == nil ||
		fmt.Sprint(e1.Outputs) != "[cidr]" || fmt.Sprint(e2.Outputs) != "[subnet]" || e1.Cycle || e2.Cycle {
		t.Fatalf("derived edges of app after the first runs: %+v", edges)
	}

	runs := func(ws *tfe.Workspace) []*tfe.Run {
		t.Helper()
		l, err := c.Runs.List(ctx, ws.ID, &tfe.RunListOptions{ListOptions: tfe.ListOptions{PageSize: 100}})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items // newest first
	}
	// waitNewRun waits for the n-th run of a workspace and for it to apply.
	waitNewRun := func(ws *tfe.Workspace, n int) *tfe.Run {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if rs := runs(ws); len(rs) >= n {
				if len(rs) > n {
					t.Fatalf("%s has %d runs, want %d", ws.Name, len(rs), n)
				}
				return waitRun(ctx, t, c, rs[0].ID, 3*time.Minute, tfe.RunApplied)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never got run %d", ws.Name, n)
			}
		}
	}
	// quiet checks that no more runs come (a negative: it can only wait).
	quiet := func(want map[*tfe.Workspace]int) {
		t.Helper()
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			for ws, n := range want {
				if got := len(runs(ws)); got != n {
					t.Fatalf("%s has %d runs, want %d", ws.Name, got, n)
				}
			}
		}
	}
	record := func() string {
		t.Helper()
		sv, err := c.StateVersions.ReadCurrentWithOptions(ctx, dns.ID, &tfe.StateVersionCurrentOptions{Include: []tfe.StateVersionIncludeOpt{tfe.SVoutputs}})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range sv.Outputs {
			if o.Name == "record" {
				return fmt.Sprint(o.Value)
			}
		}
		t.Fatalf("dns has no record output: %+v", sv.Outputs)
		return ""
	}

	// A changed output ripples: app, then dns, run and pick up the value.
	apply(net, netCV.ID, &tfe.RunVariable{Key: "cidr", Value: `"10.1.0.0/16"`})
	appRun := waitNewRun(app, 2)
	if appRun.Source != "tfe-run-trigger" || appRun.TriggerReason != "run_trigger" {
		t.Fatalf("app's triggered run: source %q, reason %q, message %q", appRun.Source, appRun.TriggerReason, appRun.Message)
	}
	waitNewRun(dns, 2)
	if got := record(); got != "dns-app-10.1.0.0/16" {
		t.Fatalf("dns record after net changed = %q", got)
	}

	// An apply that changes no output that is read starts nothing.
	apply(net, netCV.ID, &tfe.RunVariable{Key: "cidr", Value: `"10.1.0.0/16"`}, &tfe.RunVariable{Key: "tag", Value: `"b"`})
	quiet(map[*tfe.Workspace]int{app: 2, dns: 2})

	// app reads dns too: the edge dns → app would close a cycle; it is
	// reported on both workspaces and never fired.
	appCV2 := uploadConfig(ctx, t, c, app.ID, appConfig+remoteState(e.Host, "dns")+`
output "seen" { value = data.terraform_remote_state.dns.outputs.record }
`)
	apply(app, appCV2.ID) // app: 3 runs; its subnet is unchanged, so dns does not run
	for _, ws := range []*tfe.Workspace{app, dns} {
		if ed := findEdge(dependencies(t, e, ws.ID), "dns", "app"); ed == nil || !ed.Cycle {
			t.Fatalf("the edge dns → app, listed on %s: %+v, want it marked as a cycle", ws.Name, ed)
		}
	}
	quiet(map[*tfe.Workspace]int{app: 3, dns: 2})
	apply(net, netCV.ID, &tfe.RunVariable{Key: "cidr", Value: `"10.2.0.0/16"`})
	waitNewRun(app, 4)
	waitNewRun(dns, 3)
	quiet(map[*tfe.Workspace]int{app: 4, dns: 3}) // no endless runs
	if got := record(); got != "dns-app-10.2.0.0/16" {
		t.Fatalf("dns record after net changed again = %q", got)
	}

	// dns switches derived triggers off: app still follows net, dns not.
	body := strings.NewReader(`{"data":{"type":"dependency-settings","attributes":{"derived-triggers-enabled":false}}}`)
	req, _ := http.NewRequest("PATCH", e.URL+"/api/v2/workspaces/"+dns.ID+"/dependency-settings", body)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	req.Header.Set("Content-Type", "application/vnd.api+json")
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("switching derived triggers off: %s", resp.Status)
	}
	apply(net, netCV.ID, &tfe.RunVariable{Key: "cidr", Value: `"10.3.0.0/16"`})
	waitNewRun(app, 5)
	quiet(map[*tfe.Workspace]int{app: 5, dns: 3})

	// dns stops reading app: after dns's next run the edge is gone.
	dnsCV2 := uploadConfig(ctx, t, c, dns.ID, `output "record" { value = "static" }`)
	apply(dns, dnsCV2.ID)
	// The edge goes when the run's observers see it applied, just after
	// the API shows it applied: wait for that.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ed := findEdge(dependencies(t, e, dns.ID), "app", "dns")
		if ed == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edge app → dns is still listed after dns stopped reading app: %+v", ed)
		}
	}
}
