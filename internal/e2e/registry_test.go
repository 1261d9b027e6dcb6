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

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// moduleCode is a registry module (terraform_data: no provider download).
func moduleCode(version string) string {
	return fmt.Sprintf(`
variable "name" {
  type = string
}
resource "terraform_data" "net" {
  input = "${var.name}-%s"
}
output "label" { value = terraform_data.net.output }
`, version)
}

func packModule(t *testing.T, mainTF string) []byte {
	t.Helper()
	return tarball(t, map[string][]byte{"main.tf": []byte(mainTF)})
}

// TestTerraformPrivateRegistryModule publishes versions through go-tfe and
// has the real CLI resolve "~> 1.4" through modules.v1, download the
// archive from the capability URL and apply it with local state.
func TestTerraformPrivateRegistryModule(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	for _, eng := range engines(t) {
		for _, st := range testenv.Stores {
			t.Run(eng.Label()+"/"+st, func(t *testing.T) {
				t.Parallel() // a server of its own; see parallel in TestMain
				e := testenv.New(t, testenv.Options{Store: st})
				testPrivateRegistryModule(t, e, newEngineCLI(t, e, eng))
			})
		}
	}
}

func testPrivateRegistryModule(t *testing.T, e *testenv.Env, c *cli) {
	ctx := context.Background()
	const org = "acme"
	if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.RegistryModules.Create(ctx, org, tfe.RegistryModuleCreateOptions{Name: tfe.String("network"), Provider: tfe.String("aws")}); err != nil {
		t.Fatal(err)
	}
	id := tfe.RegistryModuleID{Organization: org, Name: "network", Provider: "aws", Namespace: org, RegistryName: tfe.PrivateRegistry}
	// 1.4.1 and 1.4.3 match "~> 1.4"; 1.5.0-rc1 is a prerelease (never
	// chosen), 2.0.0 is out of range, 1.4.9 is created but never uploaded.
	for _, v := range []string{"1.3.0", "1.4.1", "1.4.3", "1.5.0-rc1", "2.0.0", "1.4.9"} {
		rmv, err := e.Client.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String(v)})
		if err != nil {
			t.Fatal(err)
		}
		if v == "1.4.9" {
			continue
		}
		if err := e.Client.RegistryModules.UploadTarGzip(ctx, rmv.Links["upload"].(string), bytes.NewReader(packModule(t, moduleCode(v)))); err != nil {
			t.Fatal(err)
		}
	}

	// terraform wants a dot in a registry hostname: address the server by
	// its IP (its certificate covers 127.0.0.1), with credentials for it.
	host := strings.Replace(e.Host, "localhost", "127.0.0.1", 1)
	rc := filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", host, e.Token)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = append(c.env, "TF_CLI_CONFIG_FILE="+rc)
	dir := writeConfig(t, map[string]string{"main.tf": fmt.Sprintf(`
module "x" {
  source  = "%s/%s/network/aws"
  version = "~> 1.4"
  name    = "edge"
}
output "label" { value = module.x.label }
`, host, org)})
	c.run(dir, "init")
	c.run(dir, "apply", "-auto-approve")
	var outs map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(c.run(dir, "output", "-json")), &outs); err != nil {
		t.Fatal(err)
	}
	// "~> 1.4" allows >= 1.4, < 2.0: the newest published release is 1.4.3
	// (1.5.0-rc1 is a prerelease, 1.4.9 has no archive).
	if outs["label"].Value != "edge-1.4.3" {
		t.Fatalf("module output = %v, want edge-1.4.3", outs["label"].Value)
	}
	if list := c.run(dir, "state", "list"); !strings.Contains(list, "module.x.terraform_data.net") {
		t.Fatalf("state list: %s", list)
	}

	// Without credentials for the host, the registry refuses.
	anon := *c
	anon.env = append(append([]string{}, c.env...), "TF_CLI_CONFIG_FILE="+filepath.Join(t.TempDir(), "none.rc"))
	dir2 := writeConfig(t, map[string]string{"main.tf": fmt.Sprintf(`
module "x" {
  source  = "%s/%s/network/aws"
  version = "~> 1.4"
  name    = "edge"
}
`, host, org)})
	if out, errOut, err := anon.try(dir2, "init"); err == nil {
		t.Fatalf("init without credentials succeeded:\n%s\n%s", out, errOut)
	} else if !strings.Contains(errOut, "401 Unauthorized") {
		t.Fatalf("init without credentials failed for another reason:\n%s", errOut)
	}
}

// TestTerraformSharedModule: terraform init, with the token of a member
// of another organization only, resolves an organization's private module
// once a site admin names that organization a module consumer, and not
// before (go-tfe's admin API sets the consumers).
func TestTerraformSharedModule(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	for _, o := range []string{"acme", "beta"} {
		testenv.NewOrg(t, e.Client, o)
	}
	if _, err := e.Client.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("network"), Provider: tfe.String("aws")}); err != nil {
		t.Fatal(err)
	}
	id := tfe.RegistryModuleID{Organization: "acme", Name: "network", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
	rmv, err := e.Client.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("1.0.0")})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.RegistryModules.UploadTarGzip(ctx, rmv.Links["upload"].(string), bytes.NewReader(packModule(t, moduleCode("1.0.0")))); err != nil {
		t.Fatal(err)
	}
	_, m := e.UserClient(t, "beta", "dev@beta.test")
	_, token, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
	if err != nil {
		t.Fatal(err)
	}

	c := newCLI(t, e, "terraform")
	host := strings.Replace(e.Host, "localhost", "127.0.0.1", 1)
	rc := filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", host, token)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = append(c.env, "TF_CLI_CONFIG_FILE="+rc)
	config := map[string]string{"main.tf": fmt.Sprintf(`
module "x" {
  source  = "%s/acme/network/aws"
  version = "1.0.0"
  name    = "beta"
}
output "label" { value = module.x.label }
`, host)}
	if out, errOut, err := c.try(writeConfig(t, config), "init"); err == nil || !strings.Contains(out+errOut, "cannot be found in the module registry") {
		t.Fatalf("init of an unshared module by another organization's member: %v\n%s\n%s", err, out, errOut)
	}
	if err := e.Client.Admin.Organizations.UpdateModuleConsumers(ctx, "acme", []string{"beta"}); err != nil {
		t.Fatal(err)
	}
	dir := writeConfig(t, config)
	c.run(dir, "init")
	c.run(dir, "apply", "-auto-approve")
	var outs map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(c.run(dir, "output", "-json")), &outs); err != nil || outs["label"].Value != "beta-1.0.0" {
		t.Fatalf("the shared module's output = %v, %v; want beta-1.0.0", outs, err)
	}
}
