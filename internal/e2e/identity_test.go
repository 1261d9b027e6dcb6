package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/idtoken/idtokentest"
	"github.com/terracehq/terrace/internal/testenv"
)

// Workload identity: a workspace whose environment sets
// TFC_WORKLOAD_IDENTITY_AUDIENCE[_<TAG>] gets a signed token per audience
// in TFC_WORKLOAD_IDENTITY_TOKEN[_<TAG>] while terraform applies. The
// provisioner hands the tokens to the test through files and echoes one,
// which the apply log must show masked. The test then does what AWS or
// Vault would: fetch the discovery document and the key set from the
// server's URL and verify each token with go-jose.
func TestWorkloadIdentityTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	c := e.Client
	org := testenv.NewOrg(t, c, "acme")
	prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "Platform team"})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("network"), Project: prj})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"TFC_WORKLOAD_IDENTITY_AUDIENCE": "aws.workload.identity", "TFC_WORKLOAD_IDENTITY_AUDIENCE_VAULT": "vault.example.test"} {
		if _, err := c.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String(k), Value: tfe.String(v), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	config := fmt.Sprintf(`
resource "terraform_data" "identity" {
  provisioner "local-exec" {
    command = "printf %%s \"$TFC_WORKLOAD_IDENTITY_TOKEN\" > %[1]s/aws.jwt && printf %%s \"$TFC_WORKLOAD_IDENTITY_TOKEN_VAULT\" > %[1]s/vault.jwt && echo \"the token is $TFC_WORKLOAD_IDENTITY_TOKEN\""
  }
}
`, out)
	cv := uploadConfig(ctx, t, c, ws.ID, config)
	r := createRun(ctx, t, c, ws.ID, cv.ID, nil)
	logs := func() string { return strings.Join(phaseLogs(ctx, t, e, r), "\n") }
	if r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
		t.Fatalf("the run ended %s: %s\n%s", r.Status, erroredReason(ctx, t, c, r.ID), logs())
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Fatalf("the apply's %s was empty: no token in its environment", name)
		}
		return string(b)
	}
	awsTok, vaultTok := read("aws.jwt"), read("vault.jwt")
	applyLog := logs()
	if strings.Contains(applyLog, awsTok) || !strings.Contains(applyLog, "the token is ***") {
		t.Errorf("the apply log does not mask the token:\n%s", applyLog)
	}

	// What a relying party does.
	verify := func(tok, audience string) map[string]any { return idtokentest.Verify(t, e.HTTP, e.URL, tok, audience) }
	for tok, aud := range map[string]string{awsTok: "aws.workload.identity", vaultTok: "vault.example.test"} {
		claims := verify(tok, aud)
		want := map[string]any{
			"sub":                       "organization:acme:project:Platform team:workspace:network:run_phase:apply",
			"terraform_run_phase":       "apply",
			"terraform_run_id":          r.ID,
			"terraform_workspace_id":    ws.ID,
			"terraform_project_id":      prj.ID,
			"terraform_organization_id": org.ExternalID,
			"terraform_full_workspace":  "organization:acme:project:Platform team:workspace:network",
		}
		idtokentest.Claims(t, aud+" token", claims, want)
	}
	// A run applied by hand: its apply is a job of its own, which asks for
	// its tokens as it starts.
	for _, f := range []string{"aws.jwt", "vault.jwt"} {
		if err := os.Remove(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
	cv = uploadConfig(ctx, t, c, ws.ID, strings.Replace(config, `"identity"`, `"identity_again"`, 1))
	r2, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, AutoApply: tfe.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	if r2 = waitRun(ctx, t, c, r2.ID, 2*time.Minute, tfe.RunPlanned, tfe.RunErrored); r2.Status != tfe.RunPlanned {
		t.Fatalf("the second run ended %s: %s", r2.Status, erroredReason(ctx, t, c, r2.ID))
	}
	if err := c.Runs.Apply(ctx, r2.ID, tfe.RunApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if r2 = waitRun(ctx, t, c, r2.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r2.Status != tfe.RunApplied {
		t.Fatalf("the second run ended %s: %s", r2.Status, erroredReason(ctx, t, c, r2.ID))
	}
	claims := verify(read("aws.jwt"), "aws.workload.identity")
	if claims["terraform_run_id"] != r2.ID || claims["terraform_run_phase"] != "apply" || claims["jti"] == "" {
		t.Errorf("the second run's apply token: %v", claims)
	}

	// The tokens are the run's alone: nothing of them is kept.
	vars, err := c.Variables.List(ctx, ws.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vars.Items {
		if strings.HasPrefix(v.Key, "TFC_WORKLOAD_IDENTITY_TOKEN") {
			t.Errorf("the workspace has a variable %s", v.Key)
		}
	}
}
