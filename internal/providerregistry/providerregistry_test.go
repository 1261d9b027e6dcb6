package providerregistry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/providerregistry"
	"github.com/terracehq/terrace/internal/providerregistry/release"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// fixture is an organization with a signing key in its namespace and a
// private provider, and the release files of one version.
type fixture struct {
	e        *testenv.Env
	org      string
	key      *release.Key
	pid      tfe.RegistryProviderID
	zips     map[string][]byte
	sums     []byte
	sig      []byte
	linuxZip string
}

func newFixture(t *testing.T, e *testenv.Env) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{e: e, org: testenv.NewOrg(t, e.Client, "acme").Name}
	var err error
	if f.key, err = release.NewKey("Acme", "ops@acme.test"); err != nil {
		t.Fatal(err)
	}
	armored, err := f.key.PublicArmor()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.GPGKeys.Create(ctx, tfe.PrivateRegistry, tfe.GPGKeyCreateOptions{Namespace: f.org, AsciiArmor: armored}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.RegistryProviders.Create(ctx, f.org, tfe.RegistryProviderCreateOptions{Name: "toolbox", Namespace: f.org, RegistryName: tfe.PrivateRegistry}); err != nil {
		t.Fatal(err)
	}
	f.pid = tfe.RegistryProviderID{OrganizationName: f.org, RegistryName: tfe.PrivateRegistry, Namespace: f.org, Name: "toolbox"}
	f.zips = map[string][]byte{}
	for _, p := range []string{"linux_amd64", "darwin_arm64"} {
		z, err := release.Zip(map[string][]byte{"terraform-provider-toolbox_v1.0.0": []byte("#!/bin/sh\necho " + p + "\n")})
		if err != nil {
			t.Fatal(err)
		}
		f.zips["terraform-provider-toolbox_1.0.0_"+p+".zip"] = z
	}
	f.linuxZip = "terraform-provider-toolbox_1.0.0_linux_amd64.zip"
	f.sums = release.Shasums(f.zips)
	if f.sig, err = f.key.Sign(f.sums); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) version(t *testing.T, version, keyID string) *tfe.RegistryProviderVersion {
	t.Helper()
	v, err := f.e.Client.RegistryProviderVersions.Create(context.Background(), f.pid, tfe.RegistryProviderVersionCreateOptions{Version: version, KeyID: keyID, Protocols: []string{"5.0", "6.0"}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (f *fixture) vid(version string) tfe.RegistryProviderVersionID {
	return tfe.RegistryProviderVersionID{RegistryProviderID: f.pid, Version: version}
}

func (f *fixture) platform(t *testing.T, version, os, arch, filename, shasum string) *tfe.RegistryProviderPlatform {
	t.Helper()
	pl, err := f.e.Client.RegistryProviderPlatforms.Create(context.Background(), f.vid(version), tfe.RegistryProviderPlatformCreateOptions{OS: os, Arch: arch, Shasum: shasum, Filename: filename})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// put PUTs body to a capability link and returns the status and body.
func put(t *testing.T, e *testenv.Env, link any, body []byte) (int, string) {
	t.Helper()
	u, ok := link.(string)
	if !ok || u == "" {
		t.Fatalf("no link: %v", link)
	}
	req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func mustPut(t *testing.T, e *testenv.Env, link any, body []byte) {
	t.Helper()
	if code, b := put(t, e, link, body); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, b)
	}
}

func get(t *testing.T, e *testenv.Env, url, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type protoVersions struct {
	Versions []struct {
		Version   string   `json:"version"`
		Protocols []string `json:"protocols"`
		Platforms []struct {
			OS   string `json:"os"`
			Arch string `json:"arch"`
		} `json:"platforms"`
	} `json:"versions"`
}

func (f *fixture) protoVersions(t *testing.T, token string) protoVersions {
	t.Helper()
	code, b := get(t, f.e, f.e.URL+"/api/registry/v1/providers/"+f.org+"/toolbox/versions", token)
	if code != http.StatusOK {
		t.Fatalf("versions: %d %s", code, b)
	}
	var out protoVersions
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPublishAndInstallProtocol: a version is offered through
// providers.v1 only once SHA256SUMS, its signature and a platform's zip
// are uploaded, with the platforms that have a zip; the download answer
// names capability URLs serving exactly what was uploaded, and a key that
// verifies the signature.
func TestPublishAndInstallProtocol(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		f := newFixture(t, e)
		v := f.version(t, "1.0.0", f.key.KeyID())
		if v.ShasumsUploaded || v.ShasumsSigUploaded || v.KeyID != f.key.KeyID() {
			t.Fatalf("new version: %+v", v)
		}
		if _, ok := v.Links["shasums-download"]; ok {
			t.Fatal("a new version links a SHA256SUMS download")
		}
		if got := f.protoVersions(t, e.Token); len(got.Versions) != 0 {
			t.Fatalf("offered before anything was uploaded: %+v", got)
		}
		linux := f.platform(t, "1.0.0", "linux", "amd64", f.linuxZip, release.SHA256(f.zips[f.linuxZip]))
		darwinName := "terraform-provider-toolbox_1.0.0_darwin_arm64.zip"
		f.platform(t, "1.0.0", "darwin", "arm64", darwinName, release.SHA256(f.zips[darwinName]))
		mustPut(t, e, v.Links["shasums-upload"], f.sums)
		mustPut(t, e, v.Links["shasums-sig-upload"], f.sig)
		if got := f.protoVersions(t, e.Token); len(got.Versions) != 0 {
			t.Fatalf("offered before a zip was uploaded: %+v", got)
		}
		mustPut(t, e, linux.Links["provider-binary-upload"], f.zips[f.linuxZip])

		rv, err := e.Client.RegistryProviderVersions.Read(ctx, f.vid("1.0.0"))
		if err != nil {
			t.Fatal(err)
		}
		if !rv.ShasumsUploaded || !rv.ShasumsSigUploaded || len(rv.RegistryProviderPlatforms) != 2 {
			t.Fatalf("version after uploads: %+v", rv)
		}
		pls, err := e.Client.RegistryProviderPlatforms.List(ctx, f.vid("1.0.0"), nil)
		if err != nil {
			t.Fatal(err)
		}
		uploaded := map[string]bool{}
		for _, p := range pls.Items {
			uploaded[p.OS+"_"+p.Arch] = p.ProviderBinaryUploaded
		}
		if !uploaded["linux_amd64"] || uploaded["darwin_arm64"] || pls.TotalCount != 2 {
			t.Fatalf("platforms: %v (total %d)", uploaded, pls.TotalCount)
		}

		got := f.protoVersions(t, e.Token)
		if len(got.Versions) != 1 || got.Versions[0].Version != "1.0.0" || strings.Join(got.Versions[0].Protocols, ",") != "5.0,6.0" ||
			len(got.Versions[0].Platforms) != 1 || got.Versions[0].Platforms[0].OS != "linux" {
			t.Fatalf("versions: %+v", got)
		}
		code, b := get(t, e, e.URL+"/api/registry/v1/providers/"+f.org+"/toolbox/1.0.0/download/darwin/arm64", e.Token)
		if code != http.StatusNotFound {
			t.Fatalf("download of a platform without zip: %d %s", code, b)
		}
		code, b = get(t, e, e.URL+"/api/registry/v1/providers/"+f.org+"/toolbox/1.0.0/download/linux/amd64", e.Token)
		if code != http.StatusOK {
			t.Fatalf("download: %d %s", code, b)
		}
		var d struct {
			Filename            string `json:"filename"`
			DownloadURL         string `json:"download_url"`
			ShasumsURL          string `json:"shasums_url"`
			ShasumsSignatureURL string `json:"shasums_signature_url"`
			Shasum              string `json:"shasum"`
			SigningKeys         struct {
				GPGPublicKeys []struct {
					KeyID      string `json:"key_id"`
					ASCIIArmor string `json:"ascii_armor"`
				} `json:"gpg_public_keys"`
			} `json:"signing_keys"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		if d.Filename != f.linuxZip || d.Shasum != release.SHA256(f.zips[f.linuxZip]) || len(d.SigningKeys.GPGPublicKeys) != 1 {
			t.Fatalf("download answer: %s", b)
		}
		// The URLs need no token (terraform sends none) and serve what
		// was uploaded.
		for url, want := range map[string][]byte{d.DownloadURL: f.zips[f.linuxZip], d.ShasumsURL: f.sums, d.ShasumsSignatureURL: f.sig} {
			if code, body := get(t, e, url, ""); code != http.StatusOK || !bytes.Equal(body, want) {
				t.Fatalf("GET %s: %d (%d bytes, want %d)", url, code, len(body), len(want))
			}
		}
		ring, err := openpgp.ReadArmoredKeyRing(strings.NewReader(d.SigningKeys.GPGPublicKeys[0].ASCIIArmor))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := openpgp.CheckDetachedSignature(ring, bytes.NewReader(f.sums), bytes.NewReader(f.sig), nil); err != nil {
			t.Fatalf("the offered key does not verify the signature: %v", err)
		}

		// Deleting the key withdraws the version: its signature can no
		// longer be checked.
		if err := e.Client.GPGKeys.Delete(ctx, tfe.GPGKeyID{RegistryName: tfe.PrivateRegistry, Namespace: f.org, KeyID: f.key.KeyID()}); err != nil {
			t.Fatal(err)
		}
		if got := f.protoVersions(t, e.Token); len(got.Versions) != 0 {
			t.Fatalf("offered without its key: %+v", got)
		}
		// Deleting the provider deletes its zips.
		if err := e.Client.RegistryProviders.Delete(ctx, f.pid); err != nil {
			t.Fatal(err)
		}
		if code, _ := get(t, e, d.DownloadURL, ""); code != http.StatusNotFound {
			t.Fatalf("zip of a deleted provider: %d", code)
		}
		var n int
		if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM registry_provider_garbage`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("garbage left: %d %v", n, err)
		}
	})
}

// apiError returns the status-bearing text of a go-tfe error.
func apiError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

// TestRefusesBadInput: every bad request is refused with a reason, and
// leaves nothing half-written.
func TestRefusesBadInput(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		f := newFixture(t, e)

		_, err := c.RegistryProviderVersions.Create(ctx, f.pid, tfe.RegistryProviderVersionCreateOptions{Version: "1.0", KeyID: f.key.KeyID()})
		apiError(t, err, "not a semantic version")
		_, err = c.RegistryProviderVersions.Create(ctx, f.pid, tfe.RegistryProviderVersionCreateOptions{Version: "1.0.0", KeyID: f.key.KeyID(), Protocols: []string{"five"}})
		apiError(t, err, `protocol "five" is invalid`)
		v := f.version(t, "1.0.0", f.key.KeyID())
		_, err = c.RegistryProviderVersions.Create(ctx, f.pid, tfe.RegistryProviderVersionCreateOptions{Version: "1.0.0", KeyID: f.key.KeyID()})
		apiError(t, err, "already exists")

		// Platforms: a bad filename, a duplicate.
		_, err = c.RegistryProviderPlatforms.Create(ctx, f.vid("1.0.0"), tfe.RegistryProviderPlatformCreateOptions{OS: "linux", Arch: "amd64", Shasum: "abc", Filename: "../../etc/passwd"})
		apiError(t, err, "filename")
		linux := f.platform(t, "1.0.0", "linux", "amd64", f.linuxZip, release.SHA256(f.zips[f.linuxZip]))
		_, err = c.RegistryProviderPlatforms.Create(ctx, f.vid("1.0.0"), tfe.RegistryProviderPlatformCreateOptions{OS: "linux", Arch: "amd64", Shasum: "abc", Filename: "x.zip"})
		apiError(t, err, "already has a linux_amd64 platform")

		// A zip whose SHA-256 is not the platform's shasum stores nothing.
		if code, body := put(t, e, linux.Links["provider-binary-upload"], []byte("not the zip")); code != http.StatusUnprocessableEntity || !strings.Contains(body, "nothing was stored") {
			t.Fatalf("wrong zip: %d %s", code, body)
		}
		_, pl, err := readPlatform(c, f, "linux", "amd64")
		if err != nil || pl.ProviderBinaryUploaded {
			t.Fatalf("platform after a refused zip: %+v %v", pl, err)
		}

		// SHA256SUMS must list every platform with its shasum; garbage
		// is refused.
		for body, want := range map[string]string{
			"":              "empty",
			"hello world\n": "is not",
			release.SHA256([]byte("x")) + "  other.zip\n":          "does not list " + f.linuxZip,
			release.SHA256([]byte("x")) + "  " + f.linuxZip + "\n": "but the linux_amd64 platform's shasum",
			// sha256sum -b: terraform would look for "*"+name.
			string(bytes.Replace(f.sums, []byte("  "+f.linuxZip), []byte(" *"+f.linuxZip), 1)): "binary mode",
		} {
			if code, got := put(t, e, v.Links["shasums-upload"], []byte(body)); code != http.StatusUnprocessableEntity || !strings.Contains(got, want) {
				t.Fatalf("SHA256SUMS %q: %d %s", body, code, got)
			}
		}
		// The signature needs SHA256SUMS first.
		if code, got := put(t, e, v.Links["shasums-sig-upload"], f.sig); code != http.StatusUnprocessableEntity || !strings.Contains(got, "before its signature") {
			t.Fatalf("signature before SHA256SUMS: %d %s", code, got)
		}
		mustPut(t, e, v.Links["shasums-upload"], f.sums)
		// A platform created after SHA256SUMS must match its line.
		_, err = c.RegistryProviderPlatforms.Create(ctx, f.vid("1.0.0"), tfe.RegistryProviderPlatformCreateOptions{OS: "darwin", Arch: "arm64", Shasum: release.SHA256([]byte("x")), Filename: "terraform-provider-toolbox_1.0.0_darwin_arm64.zip"})
		apiError(t, err, "but the darwin_arm64 platform's shasum")

		// A signature by another key, or garbage, is refused.
		other, err := release.NewKey("Mallory", "m@evil.test")
		if err != nil {
			t.Fatal(err)
		}
		forged, _ := other.Sign(f.sums)
		for _, sig := range [][]byte{forged, []byte("not a signature")} {
			if code, got := put(t, e, v.Links["shasums-sig-upload"], sig); code != http.StatusUnprocessableEntity || !strings.Contains(got, "does not verify") {
				t.Fatalf("bad signature: %d %s", code, got)
			}
		}
		// A version whose key-id the namespace does not hold: created (as
		// HCP Terraform allows), but its signature cannot be accepted.
		v2 := f.version(t, "2.0.0", "0123456789ABCDEF")
		mustPut(t, e, v2.Links["shasums-upload"], f.sums)
		if code, got := put(t, e, v2.Links["shasums-sig-upload"], f.sig); code != http.StatusUnprocessableEntity || !strings.Contains(got, "has no GPG key with key ID 0123456789ABCDEF") {
			t.Fatalf("signature of an unknown key: %d %s", code, got)
		}
		// The armored form of the right signature is accepted and kept
		// in the binary form terraform reads.
		var armored bytes.Buffer
		w, err := armor.Encode(&armored, "PGP SIGNATURE", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(f.sig)
		_ = w.Close()
		mustPut(t, e, v.Links["shasums-sig-upload"], armored.Bytes())
		rv, err := c.RegistryProviderVersions.Read(ctx, f.vid("1.0.0"))
		if err != nil || !rv.ShasumsSigUploaded {
			t.Fatalf("version after the signature: %+v %v", rv, err)
		}
		sigURL, _ := rv.Links["shasums-sig-download"].(string)
		if code, body := get(t, e, sigURL, ""); code != http.StatusOK || !bytes.Equal(body, f.sig) {
			t.Fatalf("stored signature: %d, binary form kept: %v", code, bytes.Equal(body, f.sig))
		}

		// Versions and platforms of a public provider do not exist.
		if _, err := c.RegistryProviders.Create(ctx, f.org, tfe.RegistryProviderCreateOptions{Name: "aws", Namespace: "hashicorp", RegistryName: tfe.PublicRegistry}); err != nil {
			t.Fatal(err)
		}
		code, _ := testenv.Raw(t, e.HTTP, e.URL, e.Token, http.MethodGet, "/api/v2/organizations/"+f.org+"/registry-providers/public/hashicorp/aws/versions", nil)
		if code != http.StatusNotFound {
			t.Fatalf("versions of a public provider: %d", code)
		}
		// A private provider's namespace is its organization.
		_, err = c.RegistryProviders.Create(ctx, f.org, tfe.RegistryProviderCreateOptions{Name: "x", Namespace: "someone-else", RegistryName: tfe.PrivateRegistry})
		apiError(t, err, "must be its organization")
	})
}

func readPlatform(c *tfe.Client, f *fixture, os, arch string) (*tfe.RegistryProviderVersion, *tfe.RegistryProviderPlatform, error) {
	pl, err := c.RegistryProviderPlatforms.Read(context.Background(), tfe.RegistryProviderPlatformID{RegistryProviderVersionID: f.vid("1.0.0"), OS: os, Arch: arch})
	return nil, pl, err
}

// TestGPGKeys: the server derives the key ID from the armored key and
// refuses anything but one public key, a private key above all.
func TestGPGKeys(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		testenv.NewOrg(t, c, "beta")
		key, err := release.NewKey("Acme", "ops@acme.test")
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := key.PublicArmor()
		priv, err := key.PrivateArmor()
		if err != nil {
			t.Fatal(err)
		}
		other, _ := release.NewKey("Other", "o@acme.test")
		otherPub, _ := other.PublicArmor()
		for armor, want := range map[string]string{
			priv:           "private key",
			"hello":        "exactly one armored public key block",
			pub + otherPub: "exactly one armored public key block",
			strings.Replace(pub, "PUBLIC KEY BLOCK", "SIGNATURE", 2): "not a",
		} {
			_, err := c.GPGKeys.Create(ctx, tfe.PrivateRegistry, tfe.GPGKeyCreateOptions{Namespace: org, AsciiArmor: armor})
			apiError(t, err, want)
			if strings.Contains(err.Error(), "PRIVATE KEY") || (armor == priv && strings.Contains(err.Error(), priv[40:80])) {
				t.Fatalf("the refusal repeats the private key: %v", err)
			}
		}
		keys, err := c.GPGKeys.ListPrivate(ctx, tfe.GPGKeyListOptions{Namespaces: []string{org}})
		if err != nil || len(keys.Items) != 0 {
			t.Fatalf("keys after refusals: %v %v", keys, err)
		}
		k, err := c.GPGKeys.Create(ctx, tfe.PrivateRegistry, tfe.GPGKeyCreateOptions{Namespace: org, AsciiArmor: pub})
		if err != nil {
			t.Fatal(err)
		}
		if k.KeyID != key.KeyID() || k.Namespace != org || k.AsciiArmor != pub {
			t.Fatalf("key: %+v", k)
		}
		_, err = c.GPGKeys.Create(ctx, tfe.PrivateRegistry, tfe.GPGKeyCreateOptions{Namespace: org, AsciiArmor: pub})
		apiError(t, err, "already has the GPG key")
		// Read by any case of the key ID.
		if _, err := c.GPGKeys.Read(ctx, tfe.GPGKeyID{RegistryName: tfe.PrivateRegistry, Namespace: org, KeyID: strings.ToLower(k.KeyID)}); err != nil {
			t.Fatal(err)
		}

		// A member of acme reads keys but does not manage them; someone
		// outside sees nothing.
		member, _ := e.UserClient(t, org, "member@acme.test")
		if _, err := member.GPGKeys.Read(ctx, tfe.GPGKeyID{RegistryName: tfe.PrivateRegistry, Namespace: org, KeyID: k.KeyID}); err != nil {
			t.Fatal(err)
		}
		_, err = member.GPGKeys.Create(ctx, tfe.PrivateRegistry, tfe.GPGKeyCreateOptions{Namespace: org, AsciiArmor: otherPub})
		apiError(t, err, "may not manage the private registry")
		err = member.GPGKeys.Delete(ctx, tfe.GPGKeyID{RegistryName: tfe.PrivateRegistry, Namespace: org, KeyID: k.KeyID})
		apiError(t, err, "may not manage the private registry")
		outsider, _ := e.UserClient(t, "beta", "someone@beta.test")
		_, err = outsider.GPGKeys.Read(ctx, tfe.GPGKeyID{RegistryName: tfe.PrivateRegistry, Namespace: org, KeyID: k.KeyID})
		if !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("outsider reads acme's key: %v", err)
		}
		_, err = outsider.GPGKeys.Create(ctx, tfe.PrivateRegistry, tfe.GPGKeyCreateOptions{Namespace: org, AsciiArmor: otherPub})
		if !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("outsider adds a key to acme: %v", err)
		}
		// An owner of beta only cannot move acme's key into beta, nor
		// acme's owner into a namespace it does not manage.
		_, err = c.GPGKeys.Update(ctx, tfe.GPGKeyID{RegistryName: tfe.PrivateRegistry, Namespace: org, KeyID: k.KeyID}, tfe.GPGKeyUpdateOptions{Namespace: "nowhere"})
		if !errors.Is(err, tfe.ErrNamespaceNotAuthorized) {
			t.Fatalf("move to a namespace that does not exist: %v", err)
		}
		if err := c.GPGKeys.Delete(ctx, tfe.GPGKeyID{RegistryName: tfe.PrivateRegistry, Namespace: org, KeyID: k.KeyID}); err != nil {
			t.Fatal(err)
		}
		// Adding and deleting a key are events of the organization's
		// audit trail.
		pairs, err := store.Pairs(ctx, e.Server.DB, `SELECT resource_type, action FROM audit_events WHERE organization_name = ? AND resource_type LIKE 'gpg%' ORDER BY occurred_at`, org)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(pairs) != "[[gpg-key create] [gpg-key delete]]" {
			t.Fatalf("audit events of acme's keys: %v", pairs)
		}
	})
}

// TestProviderPermissions: members read providers and install them
// through providers.v1; publishing needs manage-modules.
func TestProviderPermissions(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		f := newFixture(t, e)
		v := f.version(t, "1.0.0", f.key.KeyID())
		mustPut(t, e, v.Links["shasums-upload"], f.sums)
		mustPut(t, e, v.Links["shasums-sig-upload"], f.sig)
		pl := f.platform(t, "1.0.0", "linux", "amd64", f.linuxZip, release.SHA256(f.zips[f.linuxZip]))
		mustPut(t, e, pl.Links["provider-binary-upload"], f.zips[f.linuxZip])

		member, _ := e.UserClient(t, f.org, "member@acme.test")
		p, err := member.RegistryProviders.Read(ctx, f.pid, nil)
		if err != nil || p.Permissions.CanDelete {
			t.Fatalf("member reads: %+v %v", p, err)
		}
		mv, err := member.RegistryProviderVersions.Read(ctx, f.vid("1.0.0"))
		if err != nil || mv.Permissions.CanUploadAsset || mv.Links["shasums-upload"] != nil {
			t.Fatalf("member reads the version with upload links: %+v %v", mv, err)
		}
		_, err = member.RegistryProviderVersions.Create(ctx, f.pid, tfe.RegistryProviderVersionCreateOptions{Version: "2.0.0", KeyID: f.key.KeyID()})
		apiError(t, err, "forbidden")
		if err := member.RegistryProviders.Delete(ctx, f.pid); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("member deletes: %v", err)
		}

		team, err := c.Teams.Create(ctx, f.org, tfe.TeamCreateOptions{Name: tfe.String("platform"), OrganizationAccess: &tfe.OrganizationAccessOptions{ManageModules: tfe.Bool(true)}})
		if err != nil {
			t.Fatal(err)
		}
		publisher, _ := e.UserClient(t, f.org, "platform@acme.test", team)
		if _, err := publisher.RegistryProviderVersions.Create(ctx, f.pid, tfe.RegistryProviderVersionCreateOptions{Version: "2.0.0", KeyID: f.key.KeyID()}); err != nil {
			t.Fatalf("a manage-modules team publishes: %v", err)
		}

		// providers.v1: a member installs; someone of another organization
		// and no token do not.
		token := func(m *tfe.OrganizationMembership) string {
			t.Helper()
			_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
			if err != nil {
				t.Fatal(err)
			}
			return secret
		}
		_, m := e.UserClient(t, f.org, "reader@acme.test")
		testenv.NewOrg(t, c, "beta")
		_, o := e.UserClient(t, "beta", "someone@beta.test")
		if got := f.protoVersions(t, token(m)); len(got.Versions) != 1 {
			t.Fatalf("member sees versions %+v", got)
		}
		url := e.URL + "/api/registry/v1/providers/" + f.org + "/toolbox/versions"
		if code, _ := get(t, e, url, token(o)); code != http.StatusNotFound {
			t.Fatalf("versions for someone of another organization: %d", code)
		}
		if code, _ := get(t, e, url, ""); code != http.StatusUnauthorized {
			t.Fatalf("versions without a token: %d", code)
		}
	})
}

// TestWhoInstalls: providers.v1 answers members, team and organization
// tokens and the token of a run of the organization (terraform init in a
// remote run); not agent tokens, nor a run of another organization. The
// GPG keys are read by members only. An organization that refuses user
// tokens refuses them on providers.v1 too.
func TestWhoInstalls(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		f := newFixture(t, e)
		v := f.version(t, "1.0.0", f.key.KeyID())
		mustPut(t, e, v.Links["shasums-upload"], f.sums)
		mustPut(t, e, v.Links["shasums-sig-upload"], f.sig)
		pl := f.platform(t, "1.0.0", "linux", "amd64", f.linuxZip, release.SHA256(f.zips[f.linuxZip]))
		mustPut(t, e, pl.Links["provider-binary-upload"], f.zips[f.linuxZip])

		token := func(kind auth.Kind, subject string) string {
			t.Helper()
			_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: kind, Subject: subject})
			if err != nil {
				t.Fatal(err)
			}
			return secret
		}
		// A run that stays queued: its workspace runs on an agent pool
		// without agents.
		queuedRun := func(org string) string {
			t.Helper()
			pool, err := c.AgentPools.Create(ctx, org, tfe.AgentPoolCreateOptions{Name: tfe.String("pool")})
			if err != nil {
				t.Fatal(err)
			}
			ws, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("app"), ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID)})
			if err != nil {
				t.Fatal(err)
			}
			cv := testenv.UploadConfig(ctx, t, c, ws.ID, `output "o" { value = 1 }`)
			r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			return r.ID
		}
		_, m := e.UserClient(t, f.org, "member@acme.test")
		team, err := c.Teams.Create(ctx, f.org, tfe.TeamCreateOptions{Name: tfe.String("devs")})
		if err != nil {
			t.Fatal(err)
		}
		orgToken, err := c.OrganizationTokens.Create(ctx, f.org)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := c.AgentPools.Create(ctx, f.org, tfe.AgentPoolCreateOptions{Name: tfe.String("agents")})
		if err != nil {
			t.Fatal(err)
		}
		agentToken, err := c.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("agent")})
		if err != nil {
			t.Fatal(err)
		}
		testenv.NewOrg(t, c, "beta")
		betaRun := token(auth.KindRun, queuedRun("beta"))

		base := e.URL + "/api/registry/v1/providers/" + f.org + "/toolbox"
		// The GPG key API is the registry's management API, which no
		// guard decides (it is under /api/registry): members read keys;
		// a run's or an agent's token does not, whatever terraform init
		// fetches through providers.v1.
		keys := e.URL + "/api/registry/private/v2/gpg-keys"
		for _, tc := range []struct {
			who, token string
			want, keys int
		}{
			{"a member", token(auth.KindUser, m.User.ID), http.StatusOK, http.StatusOK},
			{"a team token", token(auth.KindTeam, team.ID), http.StatusOK, http.StatusOK},
			{"the organization token", orgToken.Token, http.StatusOK, http.StatusOK},
			{"a run token", token(auth.KindRun, queuedRun(f.org)), http.StatusOK, http.StatusForbidden},
			{"a run token of another organization", betaRun, http.StatusNotFound, http.StatusNotFound},
			{"an agent token", agentToken.Token, http.StatusForbidden, http.StatusForbidden},
		} {
			for _, path := range []string{"/versions", "/1.0.0/download/linux/amd64"} {
				if code, body := get(t, e, base+path, tc.token); code != tc.want {
					t.Errorf("%s GET %s: %d %s, want %d", tc.who, path, code, body, tc.want)
				}
			}
			for _, url := range []string{keys + "?filter[namespace]=" + f.org, keys + "/" + f.org + "/" + f.key.KeyID()} {
				if code, body := get(t, e, url, tc.token); code != tc.keys {
					t.Errorf("%s GET %s: %d %.200s, want %d", tc.who, url, code, body, tc.keys)
				}
			}
		}

		// Shared globally by a site admin, the provider installs for the
		// callers of every organization (the GPG key API stays acme's);
		// unshared, not any more, at once.
		_, betaMember := e.UserClient(t, "beta", "dev@beta.test")
		betaUser := token(auth.KindUser, betaMember.User.ID)
		for _, on := range []bool{true, false} {
			if _, err := c.Admin.Organizations.Update(ctx, f.org, tfe.AdminOrganizationUpdateOptions{GlobalProviderSharing: tfe.Bool(on)}); err != nil {
				t.Fatal(err)
			}
			want := map[bool]int{true: http.StatusOK, false: http.StatusNotFound}[on]
			for who, tok := range map[string]string{"beta's run token": betaRun, "beta's member": betaUser} {
				for _, path := range []string{"/versions", "/1.0.0/download/linux/amd64"} {
					if code, body := get(t, e, base+path, tok); code != want {
						t.Errorf("%s GET %s (global provider sharing %v): %d %.200s, want %d", who, path, on, code, body, want)
					}
				}
				if code, body := get(t, e, keys+"/"+f.org+"/"+f.key.KeyID(), tok); code != http.StatusNotFound {
					t.Errorf("%s reading acme's GPG key (global provider sharing %v): %d %.200s, want 404", who, on, code, body)
				}
			}
		}

		// An organization that refuses user tokens refuses them here too,
		// as on every other route of its own.
		member := token(auth.KindUser, m.User.ID)
		if _, err := c.Organizations.Update(ctx, f.org, tfe.OrganizationUpdateOptions{UserTokensEnabled: tfe.Bool(false)}); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/versions", "/1.0.0/download/linux/amd64"} {
			if code, body := get(t, e, base+path, member); code != http.StatusUnauthorized {
				t.Errorf("a member's user token, refused by the organization, GET %s: %d %.200s, want 401", path, code, body)
			}
		}
		if code, body := get(t, e, base+"/versions", token(auth.KindTeam, team.ID)); code != http.StatusOK {
			t.Errorf("a team token once user tokens are refused: %d %.200s", code, body)
		}
	})
}

// TestUploadLimitsAndCleanup: uploads over the limits are refused with
// 413 and store nothing; deleting the organization deletes its zips.
func TestUploadLimitsAndCleanup(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		f := newFixture(t, e)
		v := f.version(t, "1.0.0", f.key.KeyID())
		pl := f.platform(t, "1.0.0", "linux", "amd64", f.linuxZip, release.SHA256(f.zips[f.linuxZip]))
		small := providerregistry.NewService(e.Server.DB, e.Server.Blobs, e.Server.Signer, nil, providerregistry.Options{MaxBinaryBytes: 64, MaxShasumsBytes: 64, MaxSignatureBytes: 64})
		if _, err := small.UploadBinary(ctx, pl.ID, bytes.NewReader(f.zips[f.linuxZip])); core.KindOf(err) != core.KindTooLarge {
			t.Fatalf("zip over the limit: %v", err)
		}
		if _, err := small.UploadShasums(ctx, v.ID, bytes.NewReader(f.sums)); core.KindOf(err) != core.KindTooLarge {
			t.Fatalf("SHA256SUMS over the limit: %v", err)
		}
		var n int
		if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM registry_provider_garbage`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("refused uploads left %d blobs to collect (%v)", n, err)
		}

		mustPut(t, e, pl.Links["provider-binary-upload"], f.zips[f.linuxZip])
		var key string
		if err := e.Server.DB.QueryRow(ctx, `SELECT blob_key FROM registry_provider_platforms WHERE id = ?`, pl.ID).Scan(&key); err != nil {
			t.Fatal(err)
		}
		if err := e.Client.Organizations.Delete(ctx, f.org); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Server.Providers.Ledger().Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := e.Server.Blobs.Exists(ctx, key); err != nil || ok {
			t.Fatalf("zip of a deleted organization still stored: %v %v", ok, err)
		}
	})
}

// TestRenamedOrganization: a private provider's namespace is its
// organization, renamed with it. After acme becomes acme-corp, its members
// install acme-corp/toolbox; a new organization that takes the name acme
// and publishes its own toolbox neither hides acme-corp's provider nor
// reaches acme-corp's members.
func TestRenamedOrganization(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		f := newFixture(t, e)
		v := f.version(t, "1.0.0", f.key.KeyID())
		mustPut(t, e, v.Links["shasums-upload"], f.sums)
		mustPut(t, e, v.Links["shasums-sig-upload"], f.sig)
		pl := f.platform(t, "1.0.0", "linux", "amd64", f.linuxZip, release.SHA256(f.zips[f.linuxZip]))
		mustPut(t, e, pl.Links["provider-binary-upload"], f.zips[f.linuxZip])
		_, m := e.UserClient(t, f.org, "member@acme.test")
		_, member, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
		if err != nil {
			t.Fatal(err)
		}

		if _, err := c.Organizations.Update(ctx, f.org, tfe.OrganizationUpdateOptions{Name: tfe.String("acme-corp")}); err != nil {
			t.Fatal(err)
		}
		// Someone else takes the old name and publishes a toolbox there.
		testenv.NewOrg(t, c, f.org)
		if _, err := c.RegistryProviders.Create(ctx, f.org, tfe.RegistryProviderCreateOptions{Name: "toolbox", Namespace: f.org, RegistryName: tfe.PrivateRegistry}); err != nil {
			t.Fatal(err)
		}

		proto := e.URL + "/api/registry/v1/providers/"
		code, b := get(t, e, proto+"acme-corp/toolbox/versions", member)
		if code != http.StatusOK || !strings.Contains(string(b), `"1.0.0"`) {
			t.Fatalf("acme-corp/toolbox for a member of acme-corp: %d %s", code, b)
		}
		if code, b := get(t, e, proto+"acme-corp/toolbox/1.0.0/download/linux/amd64", member); code != http.StatusOK {
			t.Fatalf("download of acme-corp/toolbox: %d %s", code, b)
		}
		if code, b := get(t, e, proto+"acme/toolbox/versions", member); code != http.StatusNotFound {
			t.Fatalf("the new acme's toolbox for a member of acme-corp: %d %s", code, b)
		}
		code, b = get(t, e, proto+"acme/toolbox/versions", e.Token)
		if code != http.StatusOK || strings.Contains(string(b), `"1.0.0"`) {
			t.Fatalf("the new acme's toolbox for its owner: %d %s", code, b)
		}
		// The API finds the renamed organization's provider under its
		// new namespace, with its version.
		renamed := tfe.RegistryProviderID{OrganizationName: "acme-corp", RegistryName: tfe.PrivateRegistry, Namespace: "acme-corp", Name: "toolbox"}
		if p, err := c.RegistryProviders.Read(ctx, renamed, nil); err != nil || p.Namespace != "acme-corp" {
			t.Fatalf("acme-corp's toolbox through the API: %+v %v", p, err)
		}
		if v, err := c.RegistryProviderVersions.Read(ctx, tfe.RegistryProviderVersionID{RegistryProviderID: renamed, Version: "1.0.0"}); err != nil || !v.ShasumsUploaded {
			t.Fatalf("acme-corp's toolbox 1.0.0 through the API: %+v %v", v, err)
		}
	})
}
