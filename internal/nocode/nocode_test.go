package nocode_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// moduleCode is a no-code ready module (root module, terraform_data: no
// provider download) whose output names the version it was built from.
func moduleCode(version string) string {
	return fmt.Sprintf(`
variable "region" {
  type        = string
  description = "Where to deploy"
}
variable "instance_size" {
  type    = string
  default = "small"
}
resource "terraform_data" "net" {
  input = "${var.region}-${var.instance_size}-%s"
}
output "label" { value = terraform_data.net.output }
`, version)
}

func pack(t *testing.T, mainTF string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "main.tf", Mode: 0o644, Size: int64(len(mainTF)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(mainTF)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func publish(t *testing.T, c *tfe.Client, org, version string) {
	t.Helper()
	ctx := context.Background()
	id := tfe.RegistryModuleID{Organization: org, Name: "network", Provider: "aws", Namespace: org, RegistryName: tfe.PrivateRegistry}
	v, err := c.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String(version)})
	if err != nil {
		t.Fatalf("creating version %s: %v", version, err)
	}
	if err := c.RegistryModules.UploadTarGzip(ctx, v.Links["upload"].(string), bytes.NewReader(pack(t, moduleCode(version)))); err != nil {
		t.Fatalf("uploading version %s: %v", version, err)
	}
}

// enabledModule publishes network/aws 1.0.0 (moduleCode) in org and
// makes it an enabled no-code module pinned to that version.
func enabledModule(t *testing.T, e *testenv.Env, org string) *tfe.RegistryNoCodeModule {
	t.Helper()
	ctx := context.Background()
	rm, err := e.Client.RegistryModules.Create(ctx, org, tfe.RegistryModuleCreateOptions{Name: tfe.String("network"), Provider: tfe.String("aws")})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, e.Client, org, "1.0.0")
	ncm, err := e.Client.RegistryNoCodeModules.Create(ctx, org, tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: rm, Enabled: tfe.Bool(true), VersionPin: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	return ncm
}

// raw sends a request go-tfe has no method for and returns status and body.
func raw(t *testing.T, e *testenv.Env, token, method, path string, body any) (int, []byte) {
	t.Helper()
	return testenv.Raw(t, e.HTTP, e.URL, token, method, "/api/v2/"+path, body)
}

type upgradeDoc struct {
	Data struct {
		ID         string `json:"id"`
		Type       string `json:"type"`
		Attributes struct {
			Status  string `json:"status"`
			PlanURL string `json:"plan-url"`
		} `json:"attributes"`
	} `json:"data"`
}

func waitRun(t *testing.T, c *tfe.Client, id string, want ...tfe.RunStatus) *tfe.Run {
	t.Helper()
	return testenv.WaitRun(context.Background(), t, c, id, want...)
}

func outputs(t *testing.T, c *tfe.Client, wsID string) map[string]any {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		sv, err := c.StateVersions.ReadCurrent(ctx, wsID)
		if err == nil {
			list, err := c.StateVersions.ListOutputs(ctx, sv.ID, nil)
			if err == nil && len(list.Items) > 0 {
				out := map[string]any{}
				for _, o := range list.Items {
					out[o.Name] = o.Value
				}
				return out
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("workspace %s has no state outputs: %v", wsID, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func wantStatus(t *testing.T, what string, err error, status string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), status) {
		t.Fatalf("%s: got error %v, want %s", what, err, status)
	}
}

// TestSeedNoCodeProvisioning walks seed 000: enable no-code with a pin,
// read the variables, constrain them, provision a workspace (its run
// applies), publish and pin 1.5.0, upgrade with a changed variable,
// confirm, see the new outputs, disable no-code: the workspace remains.
func TestSeedNoCodeProvisioning(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform: skipped with -short")
	}
	testenv.ForEachStore(t, testSeed)
}

func testSeed(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	const org = "acme"
	testenv.NewOrg(t, e.Client, org)
	teams, err := e.Client.Teams.List(ctx, org, nil)
	if err != nil || len(teams.Items) != 1 {
		t.Fatalf("teams: %v %v", teams, err)
	}
	owners := teams.Items[0]
	// The platform engineer (a user token) and its automation (a team token).
	user, _ := e.UserClient(t, org, "platform@acme.test", owners)
	tt, err := e.Client.TeamTokens.Create(ctx, owners.ID)
	if err != nil {
		t.Fatal(err)
	}
	team := e.NewClient(t, tt.Token)
	ot, err := e.Client.OrganizationTokens.Create(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	orgc := e.NewClient(t, ot.Token)

	rm, err := user.RegistryModules.Create(ctx, org, tfe.RegistryModuleCreateOptions{Name: tfe.String("network"), Provider: tfe.String("aws")})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, user, org, "1.4.0")
	modID := tfe.RegistryModuleID{ID: rm.ID}

	// Organization tokens are refused on the write endpoints.
	_, err = orgc.RegistryNoCodeModules.Create(ctx, org, tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: rm, VersionPin: "1.4.0"})
	wantStatus(t, "create with an organization token", err, "forbidden")

	// Step 1: enable no-code with a pin (a user token).
	ncm, err := user.RegistryNoCodeModules.Create(ctx, org, tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: rm, Enabled: tfe.Bool(true), VersionPin: "1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ncm.ID, "nocode-") || !ncm.Enabled || ncm.VersionPin != "1.4.0" || ncm.RegistryModule.ID != rm.ID || ncm.Organization.Name != org {
		t.Fatalf("no-code module = %+v", ncm)
	}
	if _, err := user.RegistryNoCodeModules.Create(ctx, org, tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: rm}); err == nil {
		t.Fatal("a second no-code module for the same registry module was created")
	}
	if got, err := user.RegistryModules.Read(ctx, modID); err != nil || !got.NoCode {
		t.Fatalf("registry module no-code = %v, %v", got, err)
	}

	// Step 2: the module's variables.
	vars, err := user.RegistryNoCodeModules.ReadVariables(ctx, ncm.ID, "1.4.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(vars.Items) != 2 || vars.Items[0].Name != "region" || !vars.Items[0].Required || vars.Items[0].VariableType != "string" ||
		vars.Items[0].Description != "Where to deploy" || vars.Items[1].Name != "instance_size" || vars.Items[1].Required {
		t.Fatalf("variables: %+v %+v", vars.Items[0], vars.Items[1])
	}

	// Step 3: constrain values. Options for an undeclared variable are
	// refused and nothing is stored.
	_, err = user.RegistryNoCodeModules.Update(ctx, ncm.ID, tfe.RegistryNoCodeModuleUpdateOptions{RegistryModule: rm, VariableOptions: []*tfe.NoCodeVariableOption{
		{VariableName: "region", VariableType: "string", Options: []string{"us-east-1"}},
		{VariableName: "zone", VariableType: "string", Options: []string{"a"}},
	}})
	wantStatus(t, "options for an undeclared variable", err, "invalid attribute")
	if !strings.Contains(err.Error(), "zone") {
		t.Fatalf("the error does not name the variable: %v", err)
	}
	_, err = orgc.RegistryNoCodeModules.Update(ctx, ncm.ID, tfe.RegistryNoCodeModuleUpdateOptions{RegistryModule: rm, Enabled: tfe.Bool(false)})
	wantStatus(t, "update with an organization token", err, "forbidden")
	read := func() *tfe.RegistryNoCodeModule {
		t.Helper()
		got, err := user.RegistryNoCodeModules.Read(ctx, ncm.ID, &tfe.RegistryNoCodeModuleReadOptions{Include: []tfe.RegistryNoCodeModuleIncludeOpt{tfe.RegistryNoCodeIncludeVariableOptions}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(); len(got.VariableOptions) != 0 || !got.Enabled {
		t.Fatalf("a refused update changed the module: %+v", got)
	}
	_, err = user.RegistryNoCodeModules.Update(ctx, ncm.ID, tfe.RegistryNoCodeModuleUpdateOptions{RegistryModule: rm, VariableOptions: []*tfe.NoCodeVariableOption{
		{VariableName: "region", VariableType: "string", Options: []string{"us-east-1", "us-west-2", "eu-west-1"}},
		{VariableName: "instance_size", VariableType: "string", Options: []string{"small", "medium", "large"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	first := read()
	if len(first.VariableOptions) != 2 || first.VariableOptions[0].VariableName != "region" || len(first.VariableOptions[1].Options) != 3 {
		t.Fatalf("options: %+v", first.VariableOptions)
	}
	regionID, sizeID := first.VariableOptions[0].Type, first.VariableOptions[1].Type // go-tfe's id slot
	if !strings.HasPrefix(regionID, "ncvaropt-") {
		t.Fatalf("option id %q", regionID)
	}
	// The update replaces the set: region given by its id (go-tfe sends
	// the id alone) keeps its identity and values, instance_size given
	// without one becomes a new set.
	_, err = team.RegistryNoCodeModules.Update(ctx, ncm.ID, tfe.RegistryNoCodeModuleUpdateOptions{RegistryModule: rm, VariableOptions: []*tfe.NoCodeVariableOption{
		{Type: regionID},
		{VariableName: "instance_size", VariableType: "string", Options: []string{"small", "medium", "large"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	second := read()
	if len(second.VariableOptions) != 2 || second.VariableOptions[0].Type != regionID || len(second.VariableOptions[0].Options) != 3 ||
		second.VariableOptions[1].Type == sizeID {
		t.Fatalf("options after replacement: %+v %+v", second.VariableOptions[0], second.VariableOptions[1])
	}
	// With attributes (as pytfe sends them) a set given by id is replaced
	// in place: same id, new values.
	if st, body := raw(t, e, tt.Token, http.MethodPatch, "no-code-modules/"+ncm.ID, map[string]any{"data": map[string]any{
		"type": "no-code-modules",
		"relationships": map[string]any{
			"registry-module": map[string]any{"data": map[string]any{"type": "registry-modules", "id": rm.ID}},
			"variable-options": map[string]any{"data": []any{
				map[string]any{"type": "variable-options", "id": regionID, "attributes": map[string]any{"variable-name": "region", "variable-type": "string", "options": []string{"us-east-1", "us-west-2"}}},
				map[string]any{"type": "variable-options", "id": second.VariableOptions[1].Type},
			}},
		},
	}}); st != http.StatusOK {
		t.Fatalf("replacing options by id: %d %s", st, body)
	}
	if third := read(); len(third.VariableOptions) != 2 || third.VariableOptions[0].Type != regionID || len(third.VariableOptions[0].Options) != 2 ||
		third.VariableOptions[1].Type != second.VariableOptions[1].Type {
		t.Fatalf("options after replacement in place: %+v %+v", third.VariableOptions[0], third.VariableOptions[1])
	}
	if vars, err := user.RegistryNoCodeModules.ReadVariables(ctx, ncm.ID, "1.4.0", nil); err != nil || strings.Join(vars.Items[0].Options, ",") != "us-east-1,us-west-2" {
		t.Fatalf("variables with options: %+v %v", vars, err)
	}

	// Step 4: create a workspace. Bad inputs first: nothing is created.
	o, err := e.Client.Organizations.Read(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	prj := o.DefaultProject
	tfVar := func(k, v string) *tfe.Variable {
		return &tfe.Variable{Key: k, Value: v, Category: tfe.CategoryTerraform}
	}
	bad := &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{Name: "customer-acme", Project: prj, Variables: []*tfe.Variable{tfVar("region", "ap-south-1")}}
	_, err = user.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, bad)
	wantStatus(t, "a value outside the options", err, "invalid attribute")
	if !strings.Contains(err.Error(), "region") {
		t.Fatalf("the error does not name the variable: %v", err)
	}
	_, err = user.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{Name: "customer-acme", ExecutionMode: tfe.String("agent")})
	wantStatus(t, "agent execution without a pool", err, "invalid attribute")
	_, err = orgc.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{Name: "customer-acme", Variables: []*tfe.Variable{tfVar("region", "us-east-1")}})
	wantStatus(t, "create a workspace with an organization token", err, "forbidden")
	if _, err := e.Client.Workspaces.Read(ctx, org, "customer-acme"); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Fatalf("a refused creation left a workspace: %v", err)
	}

	ws, err := user.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{
		Name: "customer-acme", Project: prj, Description: tfe.String("Production environment for ACME"), AutoApply: tfe.Bool(true),
		Variables: []*tfe.Variable{tfVar("region", "us-east-1"), tfVar("instance_size", "medium")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Name != "customer-acme" || ws.SourceModuleID != rm.ID || ws.NoCodeUpgradeAvailable || !ws.AutoApply || ws.Description != "Production environment for ACME" || ws.Project.ID != prj.ID {
		t.Fatalf("workspace = %+v", ws)
	}
	ws, err = user.Workspaces.ReadByIDWithOptions(ctx, ws.ID, &tfe.WorkspaceReadOptions{Include: []tfe.WSIncludeOpt{tfe.WSCurrentRun}})
	if err != nil || ws.CurrentRun == nil {
		t.Fatalf("the workspace has no run: %v", err)
	}
	waitRun(t, user, ws.CurrentRun.ID, tfe.RunApplied)
	if got := outputs(t, user, ws.ID)["label"]; got != "us-east-1-medium-1.4.0" {
		t.Fatalf("label = %v", got)
	}

	// Step 5: publish 1.5.0; nothing changes until the pin moves.
	publish(t, user, org, "1.5.0")
	if got, _ := user.Workspaces.ReadByID(ctx, ws.ID); got.NoCodeUpgradeAvailable {
		t.Fatal("upgrade available before the pin moved")
	}
	if _, err := user.RegistryNoCodeModules.Update(ctx, ncm.ID, tfe.RegistryNoCodeModuleUpdateOptions{RegistryModule: rm, VersionPin: "1.5.0"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := user.Workspaces.ReadByID(ctx, ws.ID); !got.NoCodeUpgradeAvailable {
		t.Fatal("no upgrade available after the pin moved")
	}
	// A value outside the options is refused on upgrade too.
	_, err = team.RegistryNoCodeModules.UpgradeWorkspace(ctx, ncm.ID, ws.ID, &tfe.RegistryNoCodeModuleUpgradeWorkspaceOptions{Variables: []*tfe.Variable{tfVar("instance_size", "huge")}})
	wantStatus(t, "upgrade with a value outside the options", err, "invalid attribute")

	up, err := team.RegistryNoCodeModules.UpgradeWorkspace(ctx, ncm.ID, ws.ID, &tfe.RegistryNoCodeModuleUpgradeWorkspaceOptions{Variables: []*tfe.Variable{tfVar("instance_size", "large")}})
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(up.PlanURL, "/runs/")
	if up.Status == "" || i < 0 {
		t.Fatalf("upgrade = %+v", up)
	}
	runID := up.PlanURL[i+len("/runs/"):]
	base := "no-code-modules/" + ncm.ID + "/workspaces/" + ws.ID + "/upgrade/" + runID
	var doc upgradeDoc
	deadline := time.Now().Add(4 * time.Minute)
	for {
		st, body := raw(t, e, tt.Token, http.MethodGet, base, nil)
		if st != http.StatusOK {
			t.Fatalf("reading the upgrade: %d %s", st, body)
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Data.Attributes.Status == "planned_and_finished" {
			break
		}
		if s := doc.Data.Attributes.Status; s == "errored" || s == "canceled" || time.Now().After(deadline) {
			t.Fatalf("upgrade plan %s", body)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if doc.Data.ID != runID || doc.Data.Type != "workspace-upgrade" || !strings.HasPrefix(doc.Data.Attributes.PlanURL, e.URL+"/app/acme/workspaces/customer-acme/runs/") {
		t.Fatalf("upgrade document %+v", doc)
	}
	// Until confirmed, the workspace is untouched.
	if got := outputs(t, user, ws.ID)["label"]; got != "us-east-1-medium-1.4.0" {
		t.Fatalf("label before confirmation = %v", got)
	}
	if st, body := raw(t, e, ot.Token, http.MethodPost, base, nil); st != http.StatusForbidden {
		t.Fatalf("confirm with an organization token: %d %s", st, body)
	}
	st, body := raw(t, e, tt.Token, http.MethodPost, base, nil)
	if st != http.StatusOK || string(body) != "Workspace update completed" {
		t.Fatalf("confirm: %d %s", st, body)
	}
	if st, _ := raw(t, e, tt.Token, http.MethodPost, base, nil); st != http.StatusConflict {
		t.Fatalf("confirming twice: %d", st)
	}
	runs, err := user.Runs.List(ctx, ws.ID, nil)
	if err != nil || len(runs.Items) == 0 {
		t.Fatal(err)
	}
	var applyID string
	for _, r := range runs.Items {
		if strings.HasPrefix(r.Message, "No-code upgrade of") {
			applyID = r.ID
		}
	}
	if applyID == "" {
		t.Fatal("no upgrade run")
	}
	waitRun(t, user, applyID, tfe.RunApplied)
	if got := outputs(t, user, ws.ID)["label"]; got != "us-east-1-large-1.5.0" {
		t.Fatalf("label after the upgrade = %v", got)
	}
	if got, _ := user.Workspaces.ReadByID(ctx, ws.ID); got.NoCodeUpgradeAvailable {
		t.Fatal("upgrade still available after the upgrade")
	}
	wvars, err := user.Variables.List(ctx, ws.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range wvars.Items {
		if v.Key == "instance_size" && v.Value != "large" {
			t.Fatalf("instance_size = %q after the upgrade", v.Value)
		}
	}

	// Cleanup: disable no-code. The workspace remains.
	if err := orgc.RegistryNoCodeModules.Delete(ctx, ncm.ID); err == nil {
		t.Fatal("an organization token deleted the no-code module")
	}
	if err := user.RegistryNoCodeModules.Delete(ctx, ncm.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := user.RegistryNoCodeModules.Read(ctx, ncm.ID, nil); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Fatalf("read after delete: %v", err)
	}
	got, err := user.Workspaces.ReadByID(ctx, ws.ID)
	if err != nil || got.NoCodeUpgradeAvailable {
		t.Fatalf("workspace after delete: %+v %v", got, err)
	}
	if got := outputs(t, user, ws.ID)["label"]; got != "us-east-1-large-1.5.0" {
		t.Fatalf("label after delete = %v", got)
	}
	if m, err := user.RegistryModules.Read(ctx, modID); err != nil || m.NoCode {
		t.Fatalf("registry module after delete: %+v %v", m, err)
	}
	if st, _ := raw(t, e, tt.Token, http.MethodGet, base, nil); st != http.StatusNotFound {
		t.Fatalf("upgrade after delete: %d", st)
	}
}

// TestNoCodeLatestPinIsolationAndAliases covers a no-code module without
// a pin (it follows the latest published version), other organizations
// (404), malformed IDs (404), the workspace-scoped upgrade paths, an
// upgrade with nothing to do, and deleting the registry module (the
// no-code module goes, the workspace remains).
func TestNoCodeLatestPinIsolationAndAliases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform: skipped with -short")
	}
	testenv.ForEachStore(t, testLatestPin)
}

func testLatestPin(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	const org = "acme"
	testenv.NewOrg(t, e.Client, org)
	testenv.NewOrg(t, e.Client, "other")
	teams, err := e.Client.Teams.List(ctx, "other", nil)
	if err != nil {
		t.Fatal(err)
	}
	outsider, _ := e.UserClient(t, "other", "someone@other.test", teams.Items[0])
	c := e.Client

	rm, err := c.RegistryModules.Create(ctx, org, tfe.RegistryModuleCreateOptions{Name: tfe.String("network"), Provider: tfe.String("aws")})
	if err != nil {
		t.Fatal(err)
	}
	// Without a published version a no-code module can exist but cannot
	// provision.
	ncm, err := c.RegistryNoCodeModules.Create(ctx, org, tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: rm})
	if err != nil {
		t.Fatal(err)
	}
	if ncm.VersionPin != "" || !ncm.Enabled {
		t.Fatalf("no-code module = %+v", ncm)
	}
	_, err = c.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{Name: "early"})
	wantStatus(t, "provisioning without a published version", err, "invalid attribute")
	_, err = c.RegistryNoCodeModules.Create(ctx, org, tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: &tfe.RegistryModule{ID: "mod-doesnotexist"}})
	testenv.WantErr(t, "create for an unknown registry module", err, tfe.ErrResourceNotFound)
	publish(t, c, org, "1.0.0")

	for _, id := range []string{"nocode-doesnotexist", "garbage", ncm.ID + "x"} {
		_, err := c.RegistryNoCodeModules.Read(ctx, id, nil)
		testenv.WantErr(t, "read "+id, err, tfe.ErrResourceNotFound)
	}
	_, err = outsider.RegistryNoCodeModules.Read(ctx, ncm.ID, nil)
	testenv.WantErr(t, "read from another organization", err, tfe.ErrResourceNotFound)
	_, err = outsider.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{Name: "stolen", Variables: []*tfe.Variable{{Key: "region", Value: "x", Category: tfe.CategoryTerraform}}})
	testenv.WantErr(t, "provision from another organization", err, tfe.ErrResourceNotFound)
	err = outsider.RegistryNoCodeModules.Delete(ctx, ncm.ID)
	testenv.WantErr(t, "delete from another organization", err, tfe.ErrResourceNotFound)
	_, err = outsider.RegistryNoCodeModules.ReadVariables(ctx, ncm.ID, "1.0.0", nil)
	testenv.WantErr(t, "variables from another organization", err, tfe.ErrResourceNotFound)

	ws, err := c.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{
		Name: "edge", AutoApply: tfe.Bool(true), SourceName: tfe.String("my-app"), SourceURL: tfe.String("http://my-app.test"),
		Variables: []*tfe.Variable{{Key: "region", Value: "eu", Category: tfe.CategoryTerraform}, {Key: "TF_LOG", Value: "", Category: tfe.CategoryEnv}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if ws.SourceName != "my-app" || ws.SourceURL != "http://my-app.test" || ws.SourceModuleID != rm.ID {
		t.Fatalf("workspace = %+v", ws)
	}
	_, err = c.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{Name: "typo", Variables: []*tfe.Variable{{Key: "regoin", Value: "eu", Category: tfe.CategoryTerraform}}})
	wantStatus(t, "an undeclared terraform variable", err, "invalid attribute")
	ws, err = c.Workspaces.ReadByIDWithOptions(ctx, ws.ID, &tfe.WorkspaceReadOptions{Include: []tfe.WSIncludeOpt{tfe.WSCurrentRun}})
	if err != nil || ws.CurrentRun == nil {
		t.Fatalf("no run: %v", err)
	}
	waitRun(t, c, ws.CurrentRun.ID, tfe.RunApplied)
	if got := outputs(t, c, ws.ID)["label"]; got != "eu-small-1.0.0" {
		t.Fatalf("label = %v", got)
	}
	up, err := c.RegistryNoCodeModules.UpgradeWorkspace(ctx, ncm.ID, ws.ID, &tfe.RegistryNoCodeModuleUpgradeWorkspaceOptions{})
	if err != nil || up.Message == "" || up.PlanURL != "" {
		t.Fatalf("upgrade with nothing to do: %+v %v", up, err)
	}

	// Following the latest version, a publish makes an upgrade available.
	publish(t, c, org, "1.1.0")
	if got, _ := c.Workspaces.ReadByID(ctx, ws.ID); !got.NoCodeUpgradeAvailable {
		t.Fatal("no upgrade available after a publish with a floating pin")
	}
	st, body := raw(t, e, e.Token, http.MethodPost, "workspaces/"+ws.ID+"/actions/initiate-no-code-upgrade", map[string]any{"data": map[string]any{"type": "workspaces"}})
	var doc upgradeDoc
	if st != http.StatusOK || json.Unmarshal(body, &doc) != nil || !strings.HasPrefix(doc.Data.ID, "run-") {
		t.Fatalf("initiate: %d %s", st, body)
	}
	path := "workspaces/" + ws.ID + "/no-code-upgrade/" + doc.Data.ID
	deadline := time.Now().Add(4 * time.Minute)
	for doc.Data.Attributes.Status != "planned_and_finished" {
		if time.Now().After(deadline) || doc.Data.Attributes.Status == "errored" {
			t.Fatalf("upgrade plan: %+v", doc)
		}
		time.Sleep(300 * time.Millisecond)
		st, body := raw(t, e, e.Token, http.MethodGet, path, nil)
		if st != http.StatusOK || json.Unmarshal(body, &doc) != nil {
			t.Fatalf("read upgrade: %d %s", st, body)
		}
	}
	if st, body := raw(t, e, e.Token, http.MethodGet, "workspaces/"+ws.ID+"/no-code-upgrade/run-doesnotexist", nil); st != http.StatusNotFound {
		t.Fatalf("unknown upgrade: %d %s", st, body)
	}
	if st, body := raw(t, e, e.Token, http.MethodPost, path+"/actions/confirm", nil); st != http.StatusOK {
		t.Fatalf("confirm: %d %s", st, body)
	}
	deadline = time.Now().Add(4 * time.Minute)
	for outputs(t, c, ws.ID)["label"] != "eu-small-1.1.0" {
		if time.Now().After(deadline) {
			t.Fatalf("label after the upgrade = %v", outputs(t, c, ws.ID)["label"])
		}
		time.Sleep(300 * time.Millisecond)
	}

	// Deleting the registry module deletes its no-code module; the
	// workspace remains.
	if err := c.RegistryModules.Delete(ctx, org, "network"); err != nil {
		t.Fatal(err)
	}
	_, err = c.RegistryNoCodeModules.Read(ctx, ncm.ID, nil)
	testenv.WantErr(t, "read after the registry module's deletion", err, tfe.ErrResourceNotFound)
	if got, err := c.Workspaces.ReadByID(ctx, ws.ID); err != nil || got.NoCodeUpgradeAvailable || got.SourceModuleID != "" {
		t.Fatalf("workspace after the registry module's deletion: %+v %v", got, err)
	}
}
