package stack_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/idtoken/idtokentest"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestIdentityTokens: a deployment input that is identity_token.<n>.jwt
// reaches the component as a token Terrace signed for the deployment and
// the step's operation, minted when the step's job starts: the apply's
// provisioner hands its token to the test, which verifies it against the
// server's published keys as AWS or Vault would.
func TestIdentityTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org, prj, st := newStack(t, e, "ident", "net", "")
		out, dir := t.TempDir(), t.TempDir()
		files := map[string]string{
			"main.tfcomponent.hcl": `variable "token" {
  type      = string
  ephemeral = true
}

variable "out" {
  type = string
}

component "box" {
  source    = "./modules/box"
  inputs    = { token = var.token, out = var.out }
  providers = {}
}
`,
			"main.tfdeploy.hcl": fmt.Sprintf(`identity_token "aws" {
  audience = ["aws.workload.identity"]
}

deployment "prod" {
  inputs = {
    token = identity_token.aws.jwt
    out   = %q
  }
}
`, out),
			"modules/box/main.tf": `variable "token" {
  type      = string
  ephemeral = true
}

variable "out" {
  type = string
}

resource "terraform_data" "box" {
  provisioner "local-exec" {
    command = "printf %s '${var.token}' > ${var.out}/apply.jwt"
  }
}
`,
		}
		prod := deployApproved(t, c, st.ID, dir, files, "prod")
		tok, err := os.ReadFile(filepath.Join(out, "apply.jwt"))
		if err != nil || len(tok) == 0 {
			t.Fatalf("the apply left no token: %v", err)
		}

		claims := idtokentest.Verify(t, e.HTTP, e.URL, string(tok), "aws.workload.identity")
		want := map[string]any{
			"sub":                             "organization:ident:project:platform:stack:net:deployment:prod:operation:apply",
			"terraform_operation":             "apply",
			"terraform_stack_id":              st.ID,
			"terraform_stack_name":            "net",
			"terraform_stack_deployment_name": "prod",
			"terraform_plan_id":               prod.ID,
			"terraform_project_id":            prj.ID,
			"terraform_organization_id":       org.ExternalID,
		}
		idtokentest.Claims(t, "the apply's token", claims, want)

		// A speculative plan gets its token too: without it, the required
		// ephemeral variable has no value and the plan fails.
		ctx := context.Background()
		if _, err := c.Stacks.Update(ctx, st.ID, tfe.StackUpdateOptions{SpeculativeEnabled: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		spec, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, dir, &tfe.CreateStackConfigurationOptions{SpeculativeEnabled: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if r := waitRun(t, c, groupRun(t, c, spec.ID, "prod_default").ID, is("succeeded", "failed")); r.Status != "succeeded" {
			t.Fatalf("the speculative plan ended %s; diagnostics: %s", r.Status, diagnostics(t, c, spec.ID))
		}
	})
}

// uploadFiles writes files into dir and uploads them as a configuration of
// the stack.
func uploadFiles(t *testing.T, c *tfe.Client, stackID, dir string, files map[string]string) *tfe.StackConfiguration {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := c.StackConfigurations.CreateAndUpload(context.Background(), stackID, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// deployApproved uploads files as a configuration of the stack, approves
// the deployment's first plan and waits for its run to succeed.
func deployApproved(t *testing.T, c *tfe.Client, stackID, dir string, files map[string]string, deployment string) *tfe.StackDeploymentRun {
	t.Helper()
	cfg := uploadFiles(t, c, stackID, dir, files)
	r := waitRun(t, c, groupRun(t, c, cfg.ID, deployment+"_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
	if r.Status != "pre-deploying-pending-operator" {
		t.Fatalf("%s is %s; diagnostics: %s", deployment, r.Status, diagnostics(t, c, cfg.ID))
	}
	if err := c.StackDeploymentSteps.Advance(context.Background(), steps(t, c, r.ID)[0].ID); err != nil {
		t.Fatal(err)
	}
	if r = waitRun(t, c, r.ID, is("succeeded", "failed")); r.Status != "succeeded" {
		t.Fatalf("%s ended %s; diagnostics: %s", deployment, r.Status, diagnostics(t, c, cfg.ID))
	}
	return r
}
