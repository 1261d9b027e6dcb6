package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// terraform.workspace in a remote run is the workspace's name, as in HCP
// Terraform's remote execution (terraform PR #30503): for a cloud block
// naming the workspace, one selecting it by tags, and `backend "remote"`
// with a prefix (the whole name, prefix included). The state of each
// apply, a job of its own or the plan's, is the one collected, and a
// later run plans from it.
const workspaceNameConfig = `
variable "n" {
  type    = string
  default = "0"
}
resource "terraform_data" "r" { input = "${terraform.workspace}-${var.n}" }
output "ws" { value = terraform.workspace }
output "n" { value = var.n }
output "r" { value = terraform_data.r.output }
`

func TestRemoteWorkspaceName(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	// The runner's doing, the same on either store: one store, every
	// engine.
	for _, eng := range engines(t) {
		t.Run(eng.Label(), func(t *testing.T) {
			t.Parallel() // see parallel in TestMain
			e := testenv.New(t, testenv.Options{})
			testRemoteWorkspaceName(t, e, newEngineCLI(t, e, eng), eng)
		})
	}
}

func testRemoteWorkspaceName(t *testing.T, e *testenv.Env, c *cli, eng testenv.Engine) {
	ctx := context.Background()
	const org = "acme"
	testenv.NewOrg(t, e.Client, org)
	// Workspaces the tags and the prefix select are not made by init.
	for _, w := range []tfe.WorkspaceCreateOptions{
		{Name: tfe.String("tagged_app-1"), Tags: []*tfe.Tag{{Name: "app"}}},
		{Name: tfe.String("pre-app_2")},
	} {
		w.TerraformVersion = tfe.String(eng.Version)
		if _, err := e.Client.Workspaces.Create(ctx, org, w); err != nil {
			t.Fatal(err)
		}
	}
	backends := []struct {
		name, block string
		env         string // TF_WORKSPACE on the CLI's side ("" for none)
	}{
		{"ws-name_1", cloudBlock(e.Host, org, "ws-name_1"), ""},
		{"tagged_app-1", fmt.Sprintf("terraform {\n  cloud {\n    hostname = %q\n    organization = %q\n    workspaces { tags = [\"app\"] }\n  }\n}\n", e.Host, org), "tagged_app-1"},
		{"pre-app_2", fmt.Sprintf("terraform {\n  backend \"remote\" {\n    hostname = %q\n    organization = %q\n    workspaces { prefix = \"pre-\" }\n  }\n}\n", e.Host, org), "app_2"},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			cc := *c
			cc.t = t
			if b.env != "" {
				cc.env = append(append([]string{}, c.env...), "TF_WORKSPACE="+b.env)
			}
			dir := writeConfig(t, map[string]string{"main.tf": b.block + workspaceNameConfig})
			cc.run(dir, "init")
			ws, err := e.Client.Workspaces.Read(ctx, org, b.name)
			if err != nil {
				t.Fatal(err)
			}

			out := cc.run(dir, "plan")
			checkPlannedOutputs(t, out, map[string]string{"ws": b.name, "n": "0"})

			// Plan and apply in one job.
			cc.run(dir, "apply", "-auto-approve")
			checkStateOutputs(ctx, t, e.Client, ws.ID, map[string]string{"ws": b.name, "n": "0", "r": b.name + "-0"})

			// A confirmed run: its apply is a job of its own, from the
			// saved plan, and plans from the state the first apply left.
			cvs, err := e.Client.ConfigurationVersions.List(ctx, ws.ID, nil)
			if err != nil || len(cvs.Items) == 0 {
				t.Fatalf("configuration versions: %v", err)
			}
			r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{
				Workspace: ws, ConfigurationVersion: cvs.Items[0],
				Variables: []*tfe.RunVariable{{Key: "n", Value: `"2"`}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if r = waitRun(ctx, t, e.Client, r.ID, 2*time.Minute, tfe.RunPlanned, tfe.RunErrored); r.Status != tfe.RunPlanned {
				t.Fatalf("the API run ended %s: %s\n%s", r.Status, erroredReason(ctx, t, e.Client, r.ID), strings.Join(phaseLogs(ctx, t, e, r), "\n"))
			}
			if r.Plan == nil {
				t.Fatal("the run has no plan")
			}
			// Planned from the first apply's state: the resource changes,
			// it is not made anew.
			if p, err := e.Client.Plans.Read(ctx, r.Plan.ID); err != nil || p.ResourceAdditions != 0 || p.ResourceChanges != 1 {
				t.Fatalf("the run does not plan to update the resource the first apply made: %+v %v", p, err)
			}
			if err := e.Client.Runs.Apply(ctx, r.ID, tfe.RunApplyOptions{}); err != nil {
				t.Fatal(err)
			}
			if r = waitRun(ctx, t, e.Client, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
				t.Fatalf("the confirmed run ended %s: %s\n%s", r.Status, erroredReason(ctx, t, e.Client, r.ID), strings.Join(phaseLogs(ctx, t, e, r), "\n"))
			}
			checkStateOutputs(ctx, t, e.Client, ws.ID, map[string]string{"ws": b.name, "n": "2", "r": b.name + "-2"})

			// And the CLI's next plan goes on from there (n back to its
			// default).
			out = cc.run(dir, "plan")
			if !strings.Contains(out, "1 to change") {
				t.Fatalf("a plan after the applies is not empty:\n%s", out)
			}
		})
	}
}

// staleState is a state that is not the workspace's: uploaded with the
// configuration, or kept by a backend the uploader's machine recorded.
const staleState = `{"version":4,"terraform_version":"1.5.7","serial":7,"lineage":"not-the-workspace","outputs":{},
"resources":[{"mode":"managed","type":"terraform_data","name":"stale","provider":"provider[\"terraform.io/builtin/terraform\"]",
"instances":[{"schema_version":0,"attributes":{"id":"stale","input":null,"output":null,"triggers_replace":null},"sensitive_attributes":[]}]}]}`

// A configuration may come with state files of its uploader's: in the
// workspace's local state folder, or behind a backend recorded in its
// .terraform folder. The run plans from the workspace's state alone
// (none, then the first apply's), never from those.
func TestUploadedStateLeftOut(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	c := e.Client
	testenv.NewOrg(t, c, "acme")
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("leftover")})
	if err != nil {
		t.Fatal(err)
	}
	main := []byte("resource \"terraform_data\" \"r\" {}\n")
	for i, files := range []map[string][]byte{
		{"main.tf": main, "terraform.tfstate.d/leftover/terraform.tfstate": []byte(staleState)},
		{"main.tf": main, "elsewhere.d/leftover/terraform.tfstate": []byte(staleState),
			".terraform/terraform.tfstate": []byte(`{"version":3,"backend":{"type":"local","config":{"path":null,"workspace_dir":"elsewhere.d"},"hash":1}}`)},
	} {
		cv, err := c.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ConfigurationVersions.UploadTarGzip(ctx, cv.UploadURL, bytes.NewReader(tarball(t, files))); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); cv.Status != tfe.ConfigurationUploaded; time.Sleep(50 * time.Millisecond) {
			if cv, err = c.ConfigurationVersions.Read(ctx, cv.ID); err != nil || time.Now().After(deadline) {
				t.Fatalf("configuration version: %+v %v", cv, err)
			}
		}
		r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
		r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunPlannedAndFinished, tfe.RunErrored)
		p, err := c.Plans.Read(ctx, r.Plan.ID)
		if err != nil {
			t.Fatal(err)
		}
		// The first run adds r to no state; the second has nothing to do.
		if wantAdd := 1 - i; p.ResourceAdditions != wantAdd || p.ResourceDestructions != 0 || r.Status == tfe.RunErrored {
			t.Fatalf("run %d: %s, %d to add, %d to destroy, want %d to add and none destroyed: %s\n%s", i+1, r.Status,
				p.ResourceAdditions, p.ResourceDestructions, wantAdd, erroredReason(ctx, t, c, r.ID), strings.Join(phaseLogs(ctx, t, e, r), "\n"))
		}
	}
	if _, res := stateResources(ctx, t, c, ws.ID); len(res) != 1 || res["terraform_data.r"] == nil {
		t.Fatalf("the workspace's state holds %v, want terraform_data.r alone", res)
	}
}
