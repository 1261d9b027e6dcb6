package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/providerregistry/release"
	"github.com/terracehq/terrace/internal/testenv"
)

// userToken makes email a member of org (in teams, none when not given)
// and returns a user token of theirs.
func userToken(t *testing.T, e *testenv.Env, org, email string, teams ...*tfe.Team) string {
	t.Helper()
	_, m := e.UserClient(t, org, email, teams...)
	_, secret, err := e.Server.Auth.CreateToken(context.Background(), e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// readerTab is a tab of reader@acme.test, a member of acme's team
// "readers", which reads workspace ws and nothing else.
func readerTab(t *testing.T, e *testenv.Env, ws *tfe.Workspace) *tab {
	t.Helper()
	ctx := context.Background()
	team, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("readers"), Visibility: tfe.String("organization")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: team, Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	return newTab(t, e, userToken(t, e, "acme", "reader@acme.test", team))
}

// providerRelease is what one version of a provider publishes.
type providerRelease struct {
	version, keyID string
	protocols      []string
	// platforms are os_arch; upload names those whose zip is uploaded.
	platforms []string
	upload    map[string]bool
	// signed uploads SHA256SUMS and its signature.
	signed bool
}

// publishProvider creates version rel of org's private provider name
// through the API (the provider too, when it is new), signed with key,
// and returns each platform's zip filename and SHA-256.
func publishProvider(t *testing.T, e *testenv.Env, org, name string, key *release.Key, rel providerRelease) map[string][2]string {
	t.Helper()
	ctx := context.Background()
	pid := tfe.RegistryProviderID{OrganizationName: org, RegistryName: tfe.PrivateRegistry, Namespace: org, Name: name}
	if _, err := e.Client.RegistryProviders.Read(ctx, pid, nil); err != nil {
		if _, err := e.Client.RegistryProviders.Create(ctx, org, tfe.RegistryProviderCreateOptions{Name: name, Namespace: org, RegistryName: tfe.PrivateRegistry}); err != nil {
			t.Fatal(err)
		}
	}
	v, err := e.Client.RegistryProviderVersions.Create(ctx, pid, tfe.RegistryProviderVersionCreateOptions{Version: rel.version, KeyID: rel.keyID, Protocols: rel.protocols})
	if err != nil {
		t.Fatal(err)
	}
	zips := map[string][]byte{}
	files := map[string][2]string{}
	links := map[string]any{}
	for _, p := range rel.platforms {
		goos, goarch, _ := strings.Cut(p, "_")
		zip, err := release.Zip(map[string][]byte{"terraform-provider-" + name + "_v" + rel.version: []byte("#!/bin/sh\necho " + p + "\n")})
		if err != nil {
			t.Fatal(err)
		}
		filename := fmt.Sprintf("terraform-provider-%s_%s_%s.zip", name, rel.version, p)
		zips[filename] = zip
		files[p] = [2]string{filename, release.SHA256(zip)}
		pl, err := e.Client.RegistryProviderPlatforms.Create(ctx, tfe.RegistryProviderVersionID{RegistryProviderID: pid, Version: rel.version},
			tfe.RegistryProviderPlatformCreateOptions{OS: goos, Arch: goarch, Shasum: release.SHA256(zip), Filename: filename})
		if err != nil {
			t.Fatal(err)
		}
		links[p] = pl.Links["provider-binary-upload"]
	}
	if rel.signed {
		sums := release.Shasums(zips)
		sig, err := key.Sign(sums)
		if err != nil {
			t.Fatal(err)
		}
		putFile(t, e, v.Links["shasums-upload"], sums)
		putFile(t, e, v.Links["shasums-sig-upload"], sig)
	}
	for p, up := range rel.upload {
		if up {
			putFile(t, e, links[p], zips[files[p][0]])
		}
	}
	return files
}

func putFile(t *testing.T, e *testenv.Env, link any, body []byte) {
	t.Helper()
	u, ok := link.(string)
	if !ok || u == "" {
		t.Fatalf("no upload link: %v", link)
	}
	if code, b := testenv.Raw(t, e.HTTP, "", "", http.MethodPut, u, body); code != http.StatusOK {
		t.Fatalf("PUT %s: %d %s", u, code, b)
	}
}

// newSigningKey makes a key and adds it to org's namespace.
func newSigningKey(t *testing.T, e *testenv.Env, org string) *release.Key {
	t.Helper()
	key, err := release.NewKey("Acme", "ops@acme.test")
	if err != nil {
		t.Fatal(err)
	}
	armored, err := key.PublicArmor()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.GPGKeys.Create(context.Background(), tfe.PrivateRegistry, tfe.GPGKeyCreateOptions{Namespace: org, AsciiArmor: armored}); err != nil {
		t.Fatal(err)
	}
	return key
}

// A member finds the organization's private providers on the registry's
// Providers tab, each with its newest version and that version's
// platforms, and on a provider's page its versions newest first, what of
// each release is uploaded, the key that signs it, and the block that
// requires it: which the real terraform installs the provider from.
func TestProviderRegistryPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	member := userToken(t, e, "acme", "dev@acme.test")
	tb := newTab(t, e, member)

	if st := tb.open("/app/acme/registry/providers"); st != http.StatusOK {
		t.Fatalf("providers tab: %d", st)
	}
	if got := tb.text("#providers"); !strings.Contains(got, "No private providers published") {
		t.Fatalf("an empty registry's providers: %q", got)
	}
	tb.screenshot("no-providers")

	key := newSigningKey(t, e, "acme")
	// Another platform than this machine's, whose zip is not uploaded.
	here := runtime.GOOS + "_" + runtime.GOARCH
	other := "darwin_arm64"
	if here == other {
		other = "linux_amd64"
	}
	// 1.9.0 names a key the organization does not hold and has nothing
	// uploaded; 1.10.0 (newer, though not as a string) is signed, with
	// this machine's zip.
	publishProvider(t, e, "acme", "toolbox", key, providerRelease{version: "1.9.0", keyID: "0123456789ABCDEF", protocols: []string{"5.0"}, platforms: []string{here}})
	files := publishProvider(t, e, "acme", "toolbox", key, providerRelease{version: "1.10.0", keyID: key.KeyID(), protocols: []string{"6.0"},
		platforms: []string{here, other}, upload: map[string]bool{here: true}, signed: true})
	if _, err := e.Client.RegistryProviders.Create(ctx, "acme", tfe.RegistryProviderCreateOptions{Name: "empty", Namespace: "acme", RegistryName: tfe.PrivateRegistry}); err != nil {
		t.Fatal(err)
	}
	// A public provider is a reference, not one of the organization's.
	if _, err := e.Client.RegistryProviders.Create(ctx, "acme", tfe.RegistryProviderCreateOptions{Name: "aws", Namespace: "hashicorp", RegistryName: tfe.PublicRegistry}); err != nil {
		t.Fatal(err)
	}

	tb.open("/app/acme/registry")
	tb.press(`#registry-tabs a[href$="/registry/providers"]`)
	tb.waitLocation("/app/acme/registry/providers")
	rows := func() []string {
		return must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#providers tbody tr')).map(r => r.innerText.replace(/\s+/g, ' ').trim())`))
	}
	platformTags := strings.ReplaceAll(min(here, other), "_", "/") + " " + strings.ReplaceAll(max(here, other), "_", "/")
	want := []string{"acme/empty No versions yet", "acme/toolbox 1.10.0 " + platformTags}
	if got := rows(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("providers tab rows %q, want %q", got, want)
	}
	tb.screenshot("providers")
	tb.open("/app/acme/registry/providers?search=TOOL")
	if got := rows(); len(got) != 1 || !strings.HasPrefix(got[0], "acme/toolbox") {
		t.Fatalf("searching tool: %q", got)
	}
	tb.open("/app/acme/registry/providers?search=zzz")
	if got := tb.text("#providers"); !strings.Contains(got, `No private providers match “zzz”`) {
		t.Fatalf("searching zzz: %q", got)
	}

	tb.open("/app/acme/registry/providers")
	tb.press(`#providers a[href$="/private/acme/toolbox"]`)
	tb.waitLocation("/app/acme/registry/providers/private/acme/toolbox")
	block := tb.text("#required-providers")
	wantBlock := `terraform {
  required_providers {
    toolbox = {
      source  = "` + e.Host + `/acme/toolbox"
      version = "1.10.0"
    }
  }
}

provider "toolbox" {
  # Configuration options
}`
	if block != wantBlock {
		t.Fatalf("required_providers block:\n%s\nwant:\n%s", block, wantBlock)
	}
	versions := must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('section.version h3')).map(h => h.textContent)`))
	if strings.Join(versions, ",") != "1.10.0,1.9.0" {
		t.Fatalf("versions %v, want newest first", versions)
	}
	// field is the text of sel in a version's section as shown (cells
	// apart), spaces folded.
	field := func(version, sel string) string {
		full := `section[id="version-` + version + `"] ` + sel
		tb.text(full) // waits for it
		return strings.Join(strings.Fields(must(tb, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).innerText`, full)))), " ")
	}
	for _, c := range []struct{ version, sel, want string }{
		{"1.10.0", "dd.protocols", "6.0"},
		{"1.10.0", "dd.key", key.KeyID()},
		{"1.10.0", "dd.shasums", "uploaded"},
		{"1.10.0", "dd.shasums-sig", "uploaded"},
		{"1.10.0", "table.platforms", strings.ReplaceAll(here, "_", "/") + " " + files[here][0] + " " + files[here][1] + " uploaded"},
		{"1.10.0", "table.platforms", strings.ReplaceAll(other, "_", "/") + " " + files[other][0] + " " + files[other][1] + " not uploaded"},
		{"1.9.0", "dd.protocols", "5.0"},
		{"1.9.0", "dd.key", "0123456789ABCDEF not in the organization's keys"},
		{"1.9.0", "dd.shasums", "not uploaded"},
		{"1.9.0", "dd.shasums-sig", "not uploaded"},
	} {
		if got := field(c.version, c.sel); !strings.Contains(got, c.want) {
			t.Errorf("version %s %s: %q, want %q", c.version, c.sel, got, c.want)
		}
	}
	for _, sel := range []string{"dd.key", "dd.shasums", "dd.shasums-sig"} {
		if got := field("1.10.0", sel); strings.Contains(got, "not") {
			t.Errorf("version 1.10.0 %s: %q", sel, got)
		}
	}
	tb.screenshot("provider")

	// The block, as copied, installs the provider with the real
	// terraform (its credentials and the server's CA as the getting
	// started page says).
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(block+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", e.Host, member)), 0o600); err != nil {
		t.Fatal(err)
	}
	initCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatal("terraform is not on PATH: the test installs the provider with it")
	}
	cmd := exec.CommandContext(initCtx, tf, "init", "-input=false", "-no-color")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "SSL_CERT_FILE="+e.CAFile, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("terraform init with the page's block: %v\n%s", err, out)
	}
	installed := filepath.Join(dir, ".terraform", "providers", e.Host, "acme", "toolbox", "1.10.0", here, "terraform-provider-toolbox_v1.10.0")
	if _, err := os.Stat(installed); err != nil || !strings.Contains(string(out), "key ID "+key.KeyID()) {
		t.Fatalf("terraform init did not install the signed provider (%v):\n%s", err, out)
	}

	// A provider with no versions yet: its block has no version.
	tb.open("/app/acme/registry/providers/private/acme/empty")
	if !strings.Contains(tb.text("#no-versions"), "No versions yet") {
		t.Fatalf("a provider without versions: %q", tb.text("main"))
	}
	if got := tb.text("#required-providers"); !strings.Contains(got, `source = "`+e.Host+`/acme/empty"`) || strings.Contains(got, "version") {
		t.Fatalf("the block of a provider without versions:\n%s", got)
	}
	tb.screenshot("provider-no-versions")

	// Unknown providers, and public ones (no versions here), are not
	// found.
	for _, p := range []string{"private/acme/nope", "private/hashicorp/aws", "public/hashicorp/aws"} {
		if st := tb.open("/app/acme/registry/providers/" + p); st != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404", p, st)
		}
		if got := tb.text("#error"); !strings.Contains(got, "404") {
			t.Fatalf("%s: error page %q", p, got)
		}
	}
	tb.screenshot("no-provider")
}

// Who may not read the organization's registry (a user of another
// organization; an agent token of this one, which the organization check
// alone would let through) gets no provider data from the pages, while a
// member does.
func TestProviderPagesNeedRegistryRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	testenv.NewOrg(t, e.Client, "other")
	key := newSigningKey(t, e, "acme")
	files := publishProvider(t, e, "acme", "toolbox", key, providerRelease{version: "1.0.0", keyID: key.KeyID(), protocols: []string{"5.0"},
		platforms: []string{"linux_amd64"}, upload: map[string]bool{"linux_amd64": true}, signed: true})
	pool, err := e.Client.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("pool")})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := e.Client.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("agent")})
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"acme/toolbox", "1.0.0", files["linux_amd64"][0], files["linux_amd64"][1], key.KeyID()}
	pages := []string{"/app/acme/registry/providers", "/app/acme/registry/providers/private/acme/toolbox"}
	for _, c := range []struct {
		who, token string
		may        bool
	}{
		{"a member", userToken(t, e, "acme", "dev@acme.test"), true},
		{"a user of another organization", userToken(t, e, "other", "stranger@other.test"), false},
		{"an agent token", agent.Token, false},
	} {
		tb := newTab(t, e, c.token)
		seen := ""
		for _, p := range pages {
			st := tb.open(p)
			html := tb.html()
			if !c.may && st != http.StatusNotFound && st != http.StatusForbidden {
				t.Errorf("%s got %d for %s", c.who, st, p)
			}
			if c.may && st != http.StatusOK {
				t.Errorf("%s got %d for %s", c.who, st, p)
			}
			seen += html
		}
		for _, s := range secrets {
			if got := strings.Contains(seen, s); got != c.may {
				t.Errorf("%s: the pages show %q: %v", c.who, s, got)
			}
		}
		if !c.may {
			tb.screenshot("refused-" + strings.ReplaceAll(c.who, " ", "-"))
		}
	}
}

// The Providers tab reads its providers' newest versions and their
// platforms, and a provider's page its versions' platforms, each in one
// statement: a page of six costs what a page of two costs (the requests'
// own statements, not a background loop's).
func TestProviderPagesReadAtOnce(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	key := newSigningKey(t, e, "acme")
	cost := func(path, want string) int64 {
		var st int
		var body []byte
		n := e.RequestStatements(t, func() { st, body = testenv.Raw(t, e.HTTP, e.URL, e.Token, http.MethodGet, path, nil) })
		if st != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("%s: %d, without %q:\n%s", path, st, want, body)
		}
		return n
	}
	n := 0
	grow := func(to int) {
		for ; n < to; n++ {
			rel := providerRelease{keyID: key.KeyID(), platforms: []string{"linux_amd64", "darwin_arm64"}}
			rel.version = fmt.Sprintf("1.%d.0", n)
			publishProvider(t, e, "acme", "toolbox", key, rel)
			rel.version = "1.0.0"
			publishProvider(t, e, "acme", fmt.Sprintf("tool%d", n), key, rel)
		}
	}
	grow(2)
	list2 := cost("/app/acme/registry/providers", "acme/tool1")
	page2 := cost("/app/acme/registry/providers/private/acme/toolbox", "terraform-provider-toolbox_1.1.0_darwin_arm64.zip")
	grow(6)
	list6 := cost("/app/acme/registry/providers", "acme/tool5")
	page6 := cost("/app/acme/registry/providers/private/acme/toolbox", "terraform-provider-toolbox_1.5.0_darwin_arm64.zip")
	if list6 != list2 {
		t.Errorf("the Providers tab costs %d statements with 6 providers, %d with 2", list6, list2)
	}
	if page6 != page2 {
		t.Errorf("a provider's page costs %d statements with 6 versions, %d with 2", page6, page2)
	}
	t.Logf("statements: Providers tab %d, provider page %d", list6, page6)
}
