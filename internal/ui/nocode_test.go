package ui_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/testenv"
)

func bucketModule(version string) string {
	return fmt.Sprintf(`
variable "size" {
  type = string
}
variable "owner" {
  type    = string
  default = "ops"
}
resource "terraform_data" "bucket" {
  input = "${var.size}-${var.owner}-%s"
}
output "label" { value = terraform_data.bucket.output }
`, version)
}

func publish(t *testing.T, e *testenv.Env, id tfe.RegistryModuleID, version string) {
	t.Helper()
	ctx := context.Background()
	v, err := e.Client.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String(version)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(bucketModule(version)), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := slug.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.RegistryModules.UploadTarGzip(ctx, v.Links["upload"].(string), bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rv, err := e.Client.RegistryModules.ReadVersion(ctx, id, version)
		if err == nil && rv.Status == tfe.RegistryModuleVersionStatusOk {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("module version %s not published: %v", version, err)
		}
	}
}

// A workspace is provisioned from a no-code module on a form whose fields
// are the module's variables (allowed values as choices), then upgraded to
// the module's next version after its plan is shown.
func TestProvisionAndUpgradeNoCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	rm, err := e.Client.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("bucket"), Provider: tfe.String("aws")})
	if err != nil {
		t.Fatal(err)
	}
	id := tfe.RegistryModuleID{Organization: "acme", Name: "bucket", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
	publish(t, e, id, "1.0.0")
	if _, err := e.Client.RegistryNoCodeModules.Create(ctx, "acme", tfe.RegistryNoCodeModuleCreateOptions{
		RegistryModule:  rm,
		Enabled:         tfe.Bool(true),
		VariableOptions: []*tfe.NoCodeVariableOption{{VariableName: "size", VariableType: "string", Options: []string{"small", "large"}}},
	}); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, e.Token)
	tb.open("/app/acme/registry")
	tb.screenshot("registry")
	tb.press(`#modules a.provision`)
	tb.do(chromedp.WaitVisible(chromedp.CSS(`#provision`)))
	opts := must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#provision select[name="var.size"] option')).map(function(o){return o.value})`))
	if strings.Join(opts, ",") != "small,large" {
		t.Fatalf("size is offered as %v, want the allowed values small and large", opts)
	}
	if !tb.exists(`#provision input[name="var.owner"]`) {
		t.Fatal("the form lacks the owner variable")
	}
	tb.screenshot("provision-form")
	tb.do(
		chromedp.SendKeys(chromedp.CSS(`#provision input[name=workspace_name]`), "bucket-prod"),
		chromedp.SetValue(chromedp.CSS(`#provision select[name="var.size"]`), "large"),
	)
	tb.press(`#provision button`)
	tb.do(chromedp.WaitVisible(chromedp.CSS(`#lock-state`)))
	if !strings.HasSuffix(tb.location(), "/app/acme/workspaces/bucket-prod") {
		t.Fatalf("provisioning led to %s", tb.location())
	}
	ws, err := e.Client.Workspaces.Read(ctx, "acme", "bucket-prod")
	if err != nil {
		t.Fatal(err)
	}
	vars, err := e.Client.Variables.List(ctx, ws.ID, nil)
	if err != nil || len(vars.Items) != 1 || vars.Items[0].Key != "size" || vars.Items[0].Value != "large" {
		t.Fatalf("provisioned variables: %v %+v", err, vars)
	}
	// The provisioning run waits for confirmation: confirm it on its page.
	tb.press(`table.runs a`)
	tb.waitLocation("/app/acme/workspaces/bucket-prod/runs/run-")
	tb.waitText("#run-status", "planned", 2*time.Minute)
	// The planned values show in the plan's changes (the workspace has
	// structured run output: its log names the changes only).
	if ch := tb.text("#changes"); !strings.Contains(ch, "large-ops-1.0.0") {
		t.Fatalf("the plan does not use the chosen value: %q", ch)
	}
	tb.press(`#confirm`)
	tb.waitText("#run-status", "applied", 2*time.Minute)

	publish(t, e, id, "1.1.0")
	tb.open("/app/acme/workspaces/bucket-prod")
	if !strings.Contains(tb.text("#upgrade-form"), "new version available") {
		t.Fatalf("upgrade button: %q", tb.text("#upgrade-form"))
	}
	tb.press(`#upgrade-form button`)
	tb.waitLocation("/app/acme/workspaces/bucket-prod/upgrade/run-")
	tb.waitText("#run-status", "planned_and_finished", 2*time.Minute)
	tb.open(strings.TrimPrefix(tb.location(), e.URL)) // the finished plan's changes
	if ch := tb.text("#changes"); !strings.Contains(ch, "terraform_data.bucket") || !strings.Contains(ch, "large-ops-1.1.0") {
		t.Fatalf("upgrade plan changes: %q", ch)
	}
	tb.screenshot("upgrade-plan")
	tb.press(`#confirm-upgrade button`)
	tb.waitLocation("/app/acme/workspaces/bucket-prod/runs/run-")
	tb.waitText("#run-status", "applied", 2*time.Minute)
	tb.screenshot("upgraded")
	tb.open("/app/acme/workspaces/bucket-prod")
	if outs := tb.text("#outputs"); !strings.Contains(outs, "large-ops-1.1.0") {
		t.Fatalf("after the upgrade the outputs are %q", outs)
	}
	// Provisioning, confirming its run and both steps of the upgrade are
	// in the audit trail as their API requests would be.
	wantPageEvent(t, e, "workspace", "create", "", http.StatusOK)
	wantPageEvent(t, e, "run", "apply", "", http.StatusAccepted)
	wantPageEvent(t, e, "upgrade", "create", "", http.StatusOK)
	wantPageEvent(t, e, "upgrade", "update", "", http.StatusOK)
}
