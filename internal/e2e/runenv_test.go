package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// What HCP Terraform tells a run about itself: TFC_RUN_ID,
// TFC_WORKSPACE_NAME, TFC_WORKSPACE_SLUG (organization/workspace) and
// TFC_PROJECT_NAME in the environment (the provisioner fails the apply
// unless each holds what it should), and as the input variables of those
// names, for a configuration that declares them.
const runEnvConfig = `
variable "TFC_RUN_ID" { type = string }
variable "TFC_WORKSPACE_NAME" { type = string }
variable "TFC_WORKSPACE_SLUG" { type = string }
variable "TFC_PROJECT_NAME" { type = string }
resource "terraform_data" "env" {
  provisioner "local-exec" {
    command = "test \"$TFC_RUN_ID\" = \"${var.TFC_RUN_ID}\" && test \"$TFC_WORKSPACE_NAME\" = env-ws_1 && test \"$TFC_WORKSPACE_SLUG\" = acme/env-ws_1 && test \"$TFC_PROJECT_NAME\" = 'Platform team'"
  }
}
output "run" { value = var.TFC_RUN_ID }
output "name" { value = var.TFC_WORKSPACE_NAME }
output "slug" { value = var.TFC_WORKSPACE_SLUG }
output "project" { value = var.TFC_PROJECT_NAME }
`

func TestRunEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	// The runner's doing, the same on either store and engine.
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	c := e.Client
	testenv.NewOrg(t, c, "acme")
	prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "Platform team"})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("env-ws_1"), Project: prj})
	if err != nil {
		t.Fatal(err)
	}
	cv := uploadConfig(ctx, t, c, ws.ID, runEnvConfig)
	r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
	if r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
		t.Fatalf("the run ended %s: %s\n%s", r.Status, erroredReason(ctx, t, c, r.ID), strings.Join(phaseLogs(ctx, t, e, r), "\n"))
	}
	checkStateOutputs(ctx, t, c, ws.ID, map[string]string{"run": r.ID, "name": "env-ws_1", "slug": "acme/env-ws_1", "project": "Platform team"})
}
