package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"
	"github.com/spf13/cobra"

	"github.com/terracehq/terrace/internal/orchcli"
	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/testprovider"
)

// terraceCLI runs the terrace CLI's orchestrator commands in-process
// against one server, as the newcomer would from a shell.
type terraceCLI struct {
	t    *testing.T
	e    *testenv.Env
	org  string
	dir  string
	last string
}

func (c *terraceCLI) try(args ...string) (string, error) {
	root := &cobra.Command{Use: "terrace", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(orchcli.Commands()...)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(args, "--address", c.e.Host, "--token", c.e.Token, "--org", c.org))
	err := root.ExecuteContext(context.Background())
	c.last = out.String()
	return out.String(), err
}

func (c *terraceCLI) run(args ...string) string {
	c.t.Helper()
	out, err := c.try(args...)
	if err != nil {
		c.t.Fatalf("terrace %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *terraceCLI) file(name, content string) string {
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// The seed's objects, with inline modules built on terraform_data.
const (
	namespaceModule = `
variable "name" { type = string }
resource "terraform_data" "ns" { input = var.name }
output "name" { value = terraform_data.ns.output }
`
	postgresModule = `
variable "namespace" { type = string }
variable "postgres_version" { type = string }
resource "terraform_data" "db" { input = "${var.namespace}/postgres-${var.postgres_version}" }
output "host" { value = "db.${var.namespace}.internal" }
output "port" { value = 5432 }
output "version" { value = terraform_data.db.output }
`
	queueModule = `
terraform {
  required_providers {
    null = { source = "hashicorp/null" }
  }
}
variable "name" { type = string }
resource "null_resource" "queue" {
  triggers = { name = var.name }
}
resource "terraform_data" "queue" { input = var.name }
output "url" { value = "amqp://${terraform_data.queue.output}" }
`
	postgresModuleYAML = `
resource_type: postgres
description: A PostgreSQL database in its own namespace
module_source_code: |
` + "  variable \"namespace\" { type = string }\n  variable \"postgres_version\" { type = string }\n  resource \"terraform_data\" \"db\" { input = \"${var.namespace}/postgres-${var.postgres_version}\" }\n  output \"host\" { value = \"db.${var.namespace}.internal\" }\n  output \"port\" { value = 5432 }\n  output \"version\" { value = terraform_data.db.output }\n" + `
module_params:
  postgres_version:
    type: string
module_inputs:
  namespace: ${resources.ns.outputs.name}
dependencies:
  ns:
    type: k8s-namespace
`
	manifestV1 = `
shared:
  db:
    type: postgres
    params:
      postgres_version: "16"
workloads:
  api:
    outputs:
      DB_HOST: ${shared.db.outputs.host}
      DB_PORT: ${shared.db.outputs.port}
      ENV: ${context.env_id}
  worker:
    resources:
      queue:
        type: queue
    outputs:
      DB_HOST: ${shared.db.outputs.host}
      QUEUE_URL: ${resources.queue.outputs.url}
`
	manifestV2 = `
shared:
  db:
    type: postgres
    params:
      postgres_version: "17"
workloads:
  api:
    outputs:
      DB_HOST: ${shared.db.outputs.host}
      DB_PORT: ${shared.db.outputs.port}
      ENV: ${context.env_id}
  worker:
    outputs:
      DB_HOST: ${shared.db.outputs.host}
`
)

func TestOrchestratorDeploy(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t) // terraform must be on PATH for the in-process runner
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			// The queue module uses hashicorp/null, from an offline mirror.
			e := testenv.New(t, testenv.Options{Store: st, RunCLIConfig: testprovider.Install(t)})
			testOrchestratorDeploy(t, e)
		})
	}
}

func testOrchestratorDeploy(t *testing.T, e *testenv.Env) {
	t.Setenv("SSL_CERT_FILE", e.CAFile)
	ctx := context.Background()
	const org = "acme"
	if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	c := &terraceCLI{t: t, e: e, org: org, dir: t.TempDir()}

	// The platform team's objects, created the way the seed does.
	c.run("create", "environment-type", "development", "--set", "display_name=Development")
	c.run("create", "project", "my-project")
	c.run("create", "environment", "my-project", "dev", "--set", "env_type_id=development")
	for _, rt := range []struct{ id, schema string }{
		{"k8s-namespace", `{"type":"object","properties":{"name":{"type":"string"}}}`},
		{"postgres", `{"type":"object","properties":{"host":{"type":"string"},"port":{"type":"number"},"version":{"type":"string"}}}`},
		{"queue", `{"type":"object","properties":{"url":{"type":"string"}}}`},
	} {
		c.run("create", "resource-type", rt.id, "--set-json", "output_schema="+rt.schema)
	}
	c.run("create", "module", "my-namespace-module", "--set", "resource_type=k8s-namespace",
		"--set", "module_source_code="+namespaceModule, "--set", "module_inputs.name=${context.env_id}-${context.res_id}")
	c.run("create", "module", "postgres-module", "--set-yaml=@"+c.file("postgres.yaml", postgresModuleYAML))
	// Only the queue uses the null provider: when the queue is removed, the
	// provider must stay in the configuration for Terraform to destroy it.
	c.run("create", "provider", "null", "default", "--set", "source=hashicorp/null", "--set", "version_constraint=~> 3.2")
	c.run("create", "module", "queue-module", "--set", "resource_type=queue", "--set", "module_source_code="+queueModule,
		"--set", "module_inputs.name=${context.res_id}", "--set", "provider_mapping.null=null.default")
	for _, m := range []string{"my-namespace-module", "postgres-module", "queue-module"} {
		c.run("create", "module-rule", "--set", "module_id="+m)
	}
	// The same rule again is a conflict.
	if out, err := c.try("create", "module-rule", "--set", "module_id=queue-module"); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("a duplicate module rule: %v\n%s", err, out)
	}
	// Validation errors name the field.
	if _, err := c.try("create", "module", "bad-module", "--set", "resource_type=queue"); err == nil || !strings.Contains(err.Error(), "module_source") || !strings.Contains(err.Error(), "422") {
		t.Fatalf("a module without source: %v", err)
	}

	// The graph of the first manifest: two workloads share the database.
	m1 := c.file("manifest.yaml", manifestV1)
	var g struct {
		Nodes []struct{ Type, Class, ID, Module string }
		Edges []struct {
			From, To struct{ Type, Class, ID string }
		}
	}
	if err := json.Unmarshal([]byte(c.run("graph", "my-project", "dev", m1, "-o", "json")), &g); err != nil {
		t.Fatal(err)
	}
	consumers := 0
	for _, ed := range g.Edges {
		if ed.To.Type == "postgres" && ed.From.Type == "workload" {
			consumers++
		}
	}
	if len(g.Nodes) != 5 || consumers != 2 {
		t.Fatalf("graph: want 5 nodes and both workloads depending on postgres, got %+v", g)
	}
	if out := c.run("graph", "my-project", "dev", m1, "-o", "mermaid"); !strings.HasPrefix(out, "flowchart LR") {
		t.Fatalf("mermaid graph:\n%s", out)
	}

	// Deploy: the outputs come back.
	type result struct {
		Deployment struct {
			Status      string
			WorkspaceID string `json:"workspace_id"`
			Diff        []struct {
				Resource struct{ Type, Class, ID string }
				Type     string
			}
		}
		Outputs struct {
			Workloads map[string]map[string]any
			Resources map[string]map[string]any
		}
	}
	deploy := func(manifest string) result {
		t.Helper()
		var r result
		out := c.run("deploy", "my-project", "dev", manifest, "-o", "json")
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return r
	}
	r := deploy(m1)
	t.Logf("first deploy: %+v", r)
	if r.Deployment.Status != "succeeded" || len(r.Deployment.Diff) != 5 {
		t.Fatalf("first deploy: %+v", r.Deployment)
	}
	api, worker := r.Outputs.Workloads["api"], r.Outputs.Workloads["worker"]
	if api["DB_HOST"] != "db.dev-shared.db.internal" || api["ENV"] != "dev" || worker["DB_HOST"] != api["DB_HOST"] ||
		worker["QUEUE_URL"] != "amqp://workloads.worker.queue" || fmt.Sprint(api["DB_PORT"]) != "5432" {
		t.Fatalf("workload outputs: %#v", r.Outputs.Workloads)
	}
	if v := r.Outputs.Resources["postgres.default#shared.db"]["version"]; v != "dev-shared.db/postgres-16" {
		t.Fatalf("resource outputs: %#v", r.Outputs.Resources)
	}
	ws, err := e.Client.Workspaces.Read(ctx, org, "my-project-dev")
	if err != nil {
		t.Fatal(err)
	}
	if ws.ID != r.Deployment.WorkspaceID || ws.ExecutionMode != "remote" {
		t.Fatalf("the environment's workspace: %+v", ws)
	}
	resourceCount := func() int {
		t.Helper()
		ws, err := e.Client.Workspaces.ReadByID(ctx, r.Deployment.WorkspaceID)
		if err != nil {
			t.Fatal(err)
		}
		return ws.ResourceCount
	}
	if n := resourceCount(); n != 4 {
		t.Fatalf("after the first deploy the workspace has %d resources, want 4", n)
	}

	// A dry run of the changed manifest shows the change and stores nothing.
	m2 := c.file("manifest2.yaml", manifestV2)
	out := c.run("deploy", "my-project", "dev", m2, "--dry-run")
	t.Logf("dry run:\n%s", out)
	for _, want := range []string{"- queue.default#workloads.worker.queue (removed)", "~ postgres.default#shared.db (params_changed)", "~ workload.default#worker (params_changed)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("dry run: want %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "k8s-namespace") {
		t.Fatalf("dry run lists an unchanged node:\n%s", out)
	}
	if out2 := c.run("deploy", "my-project", "dev", m2, "--dry-run"); out2 != out {
		t.Fatalf("a dry run changed something:\n%s\nthen\n%s", out, out2)
	}

	// Deploying it destroys the removed queue and updates the database.
	r = deploy(m2)
	if r.Deployment.Status != "succeeded" {
		t.Fatalf("second deploy: %+v", r.Deployment)
	}
	if _, ok := r.Outputs.Resources["queue.default#workloads.worker.queue"]; ok {
		t.Fatalf("the removed queue is still an output: %#v", r.Outputs.Resources)
	}
	if _, ok := r.Outputs.Workloads["worker"]["QUEUE_URL"]; ok {
		t.Fatalf("the removed output is still there: %#v", r.Outputs.Workloads)
	}
	if v := r.Outputs.Resources["postgres.default#shared.db"]["version"]; v != "dev-shared.db/postgres-17" {
		t.Fatalf("the database was not updated: %#v", r.Outputs.Resources)
	}
	if n := resourceCount(); n != 2 {
		t.Fatalf("after removing the queue the workspace has %d resources, want 2", n)
	}
	// A plan-only deployment plans the first manifest again (a speculative
	// run) and changes nothing.
	out = c.run("deploy", "my-project", "dev", m1, "--plan-only")
	if !strings.Contains(out, "+ queue.default#workloads.worker.queue (added)") || !strings.Contains(out, "Status: succeeded") {
		t.Fatalf("plan only:\n%s", out)
	}
	if n := resourceCount(); n != 2 {
		t.Fatalf("a plan-only deployment changed the resources: %d", n)
	}
	// Nothing changes on a redeploy.
	if out := c.run("deploy", "my-project", "dev", m2, "--dry-run"); !strings.Contains(out, "No changes") {
		t.Fatalf("dry run after deploy:\n%s", out)
	}

	var deps []struct{ ID, Mode, Status string }
	if err := json.Unmarshal([]byte(c.run("get", "deployments", "my-project", "dev", "-o", "json")), &deps); err != nil {
		t.Fatal(err)
	}
	if len(deps) != 3 || deps[0].Mode != "plan_only" || deps[2].Status != "succeeded" {
		t.Fatalf("deployments: %+v", deps)
	}
	if out := c.run("get", "deployment", deps[1].ID); !strings.Contains(out, "mode: deploy") {
		t.Fatalf("get deployment:\n%s", out)
	}

	// The environment cannot be deleted while it has resources; destroy it.
	if _, err := c.try("delete", "environment", "my-project", "dev"); err == nil {
		t.Fatal("an environment with resources was deleted")
	}
	out = c.run("destroy", "my-project", "dev")
	t.Logf("destroy:\n%s", out)
	if !strings.Contains(out, "Status: succeeded") || !strings.Contains(out, "- postgres.default#shared.db (removed)") {
		t.Fatalf("destroy:\n%s", out)
	}
	if n := resourceCount(); n != 0 {
		t.Fatalf("after destroy the workspace has %d resources", n)
	}
	c.run("delete", "environment", "my-project/dev")
	if _, err := e.Client.Workspaces.Read(ctx, org, "my-project-dev"); err == nil {
		t.Fatal("the environment's workspace outlived it")
	}
}
