package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/providerregistry/release"
	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/testprovider"
)

// TestTerraformPrivateRegistryProvider publishes a stand-in provider's zip
// for this platform, with SHA256SUMS signed by a key made here, through
// go-tfe, and has the real terraform CLI install it from
// <host>/<org>/<name> through providers.v1, checking the signature with
// the namespace's key. Then it breaks what the server stores behind the
// API's back (the zip, the signature) and checks terraform's own checks
// refuse it.
func TestTerraformPrivateRegistryProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	tf := ""
	for _, eng := range engines(t) {
		if eng.Name == "terraform" {
			tf = eng.Path
			break
		}
	}
	if tf == "" {
		t.Fatal("no terraform engine")
	}
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	c := e.Client
	const org, name, version = "acme", "toolbox", "1.2.0"
	testenv.NewOrg(t, c, org)

	key, err := release.NewKey("Acme Platform", "platform@acme.test")
	if err != nil {
		t.Fatal(err)
	}
	armored, err := key.PublicArmor()
	if err != nil {
		t.Fatal(err)
	}
	gk, err := c.GPGKeys.Create(ctx, tfe.PrivateRegistry, tfe.GPGKeyCreateOptions{Namespace: org, AsciiArmor: armored})
	if err != nil {
		t.Fatal(err)
	}
	if gk.KeyID != key.KeyID() {
		t.Fatalf("server derived key ID %s, want %s", gk.KeyID, key.KeyID())
	}

	bin, err := testprovider.Build("null", runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	zipName := fmt.Sprintf("terraform-provider-%s_%s_%s_%s.zip", name, version, runtime.GOOS, runtime.GOARCH)
	zipped, err := release.Zip(map[string][]byte{"terraform-provider-" + name + "_v" + version: exe})
	if err != nil {
		t.Fatal(err)
	}
	sums := release.Shasums(map[string][]byte{zipName: zipped})
	sig, err := key.Sign(sums)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := c.RegistryProviders.Create(ctx, org, tfe.RegistryProviderCreateOptions{Name: name, Namespace: org, RegistryName: tfe.PrivateRegistry}); err != nil {
		t.Fatal(err)
	}
	pid := tfe.RegistryProviderID{OrganizationName: org, RegistryName: tfe.PrivateRegistry, Namespace: org, Name: name}
	v, err := c.RegistryProviderVersions.Create(ctx, pid, tfe.RegistryProviderVersionCreateOptions{Version: version, KeyID: key.KeyID(), Protocols: []string{"5.0"}})
	if err != nil {
		t.Fatal(err)
	}
	put(t, e, v.Links["shasums-upload"], sums)
	put(t, e, v.Links["shasums-sig-upload"], sig)
	vid := tfe.RegistryProviderVersionID{RegistryProviderID: pid, Version: version}
	pl, err := c.RegistryProviderPlatforms.Create(ctx, vid, tfe.RegistryProviderPlatformCreateOptions{OS: runtime.GOOS, Arch: runtime.GOARCH, Shasum: release.SHA256(zipped), Filename: zipName})
	if err != nil {
		t.Fatal(err)
	}
	put(t, e, pl.Links["provider-binary-upload"], zipped)

	// terraform wants a dot in a registry hostname: address the server by
	// its IP (its certificate covers 127.0.0.1), with credentials for it
	// (TF_TOKEN_* is ignored for a hostname with a port).
	host := strings.Replace(e.Host, "localhost", "127.0.0.1", 1)
	cli := newCLI(t, e, tf)
	rc := filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", host, e.Token)), 0o600); err != nil {
		t.Fatal(err)
	}
	cli.env = append(cli.env, "TF_CLI_CONFIG_FILE="+rc)
	config := map[string]string{"main.tf": fmt.Sprintf(`
terraform {
  required_providers {
    toolbox = {
      source  = "%s/%s/%s"
      version = "~> 1.2"
    }
  }
}
`, host, org, name)}

	dir := writeConfig(t, config)
	out := cli.run(dir, "init")
	if want := "(self-signed, key ID " + key.KeyID() + ")"; !strings.Contains(out, want) {
		t.Fatalf("init did not report the signature check %q:\n%s", want, out)
	}
	installed := filepath.Join(dir, ".terraform", "providers", host, org, name, version, runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-"+name+"_v"+version)
	if got, err := os.ReadFile(installed); err != nil || !bytes.Equal(got, exe) {
		t.Fatalf("installed provider %s: %v (same binary: %v)", installed, err, err == nil && bytes.Equal(got, exe))
	}
	lock, err := os.ReadFile(filepath.Join(dir, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	// zh: hashes come from the signed SHA256SUMS.
	if !strings.Contains(string(lock), "zh:"+release.SHA256(zipped)) {
		t.Fatalf("lock file has not the zip's signed hash:\n%s", lock)
	}

	// A zip changed in the blob store: terraform's checksum refuses it.
	var blobKey string
	if err := e.Server.DB.QueryRow(ctx, `SELECT blob_key FROM registry_provider_platforms WHERE id = ?`, pl.ID).Scan(&blobKey); err != nil {
		t.Fatal(err)
	}
	tampered, err := release.Zip(map[string][]byte{"terraform-provider-" + name + "_v" + version: append(exe[:len(exe):len(exe)], 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Server.Blobs.Put(ctx, blobKey, tampered); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := cli.try(writeConfig(t, config), "init"); err == nil || !strings.Contains(errOut, "incorrect checksum") {
		t.Fatalf("init of a tampered zip: err %v\n%s\n%s", err, out, errOut)
	}
	if err := e.Server.Blobs.Put(ctx, blobKey, zipped); err != nil {
		t.Fatal(err)
	}

	// A signature by another key: terraform finds no signing key for it.
	other, err := release.NewKey("Mallory", "mallory@evil.test")
	if err != nil {
		t.Fatal(err)
	}
	forged, err := other.Sign(sums)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Server.DB.Exec(ctx, `UPDATE registry_provider_versions SET shasums_sig = ? WHERE id = ?`, base64.StdEncoding.EncodeToString(forged), v.ID); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := cli.try(writeConfig(t, config), "init"); err == nil || !strings.Contains(errOut, "unknown issuer") {
		t.Fatalf("init of a forged signature: err %v\n%s\n%s", err, out, errOut)
	}
	// The API refuses the same forged signature outright.
	if code := putStatus(t, e, v.Links["shasums-sig-upload"], forged); code != http.StatusUnprocessableEntity {
		t.Fatalf("upload of a signature by another key: %d, want 422", code)
	}
}

func put(t *testing.T, e *testenv.Env, link any, body []byte) {
	t.Helper()
	if code := putStatus(t, e, link, body); code != http.StatusOK {
		t.Fatalf("PUT %v: %d", link, code)
	}
}

func putStatus(t *testing.T, e *testenv.Env, link any, body []byte) int {
	t.Helper()
	u, ok := link.(string)
	if !ok || u == "" {
		t.Fatalf("no upload link: %v", link)
	}
	req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
