package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/testenv"
)

// sensitiveDefault is the default of bucket 1.0.0's sensitive input: no
// page may show it.
const sensitiveDefault = "default-key-7f3a9c"

// bucketVersions are the files of each version of the bucket module the
// module page tests publish: 1.0.0 declares an optional input before a
// required one, a sensitive one and a provider; 2.0.0 other inputs; 3.0.0
// does not parse (refused).
var bucketVersions = map[string]string{
	"1.0.0": `
variable "tags" {
  type        = map(string)
  description = "Labels put on the bucket."
  default     = { team = "ops" }
}
variable "name" {
  type        = string
  description = "The bucket's name."
}
variable "api_key" {
  type      = string
  sensitive = true
  default   = "` + sensitiveDefault + `"
}
terraform {
  required_providers {
    random = {
      source  = "hashicorp/random"
      version = "~> 3.5"
    }
  }
}
resource "terraform_data" "bucket" {
  input = "${var.name}-1.0.0"
}
output "label" {
  description = "The bucket's label."
  value       = terraform_data.bucket.output
}
`,
	"2.0.0": `
variable "size" {
  type        = number
  description = "How many shards."
  default     = 3
}
variable "region" {
  type        = string
  description = "Where the bucket lives."
}
variable "zone" {
  type = string
}
resource "terraform_data" "bucket" {
  input = "${var.region}-${var.zone}-${var.size}"
}
output "id" {
  description = "The bucket's ID."
  value       = terraform_data.bucket.id
}
output "secret" {
  value     = "x"
  sensitive = true
}
`,
	"3.0.0": "variable \"broken\" {\n",
}

// publishModuleVersion creates version of module id with main.tf
// (none: the version stays pending) and waits for it to be want.
func publishModuleVersion(t *testing.T, e *testenv.Env, id tfe.RegistryModuleID, version, mainTF string, want tfe.RegistryModuleVersionStatus) {
	t.Helper()
	var files map[string]string
	if mainTF != "" {
		files = map[string]string{"main.tf": mainTF}
	}
	publishModuleFiles(t, e, id, version, files, want)
}

// publishModuleFiles is publishModuleVersion with the module's files
// (name → content).
func publishModuleFiles(t *testing.T, e *testenv.Env, id tfe.RegistryModuleID, version string, files map[string]string, want tfe.RegistryModuleVersionStatus) {
	t.Helper()
	ctx := context.Background()
	v, err := e.Client.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String(version)})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		return
	}
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	archive, err := slug.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A refused archive is an error to the uploader: its version's
	// status tells.
	if err := e.Client.RegistryModules.UploadTarGzip(ctx, v.Links["upload"].(string), bytes.NewReader(archive)); err != nil && want == tfe.RegistryModuleVersionStatusOk {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rv, err := e.Client.RegistryModules.ReadVersion(ctx, id, version)
		if err == nil && rv.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("module version %s not %s: %v %+v", version, want, err, rv)
		}
	}
}

// bucketRegistry publishes acme's bucket/aws module: 1.0.0 and 2.0.0 ok,
// 3.0.0 refused, 4.0.0 pending (created, nothing uploaded).
func bucketRegistry(t *testing.T, e *testenv.Env) *tfe.RegistryModule {
	t.Helper()
	rm, err := e.Client.RegistryModules.Create(context.Background(), "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("bucket"), Provider: tfe.String("aws")})
	if err != nil {
		t.Fatal(err)
	}
	id := tfe.RegistryModuleID{Organization: "acme", Name: "bucket", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
	publishModuleVersion(t, e, id, "1.0.0", bucketVersions["1.0.0"], tfe.RegistryModuleVersionStatusOk)
	publishModuleVersion(t, e, id, "2.0.0", bucketVersions["2.0.0"], tfe.RegistryModuleVersionStatusOk)
	publishModuleVersion(t, e, id, "3.0.0", bucketVersions["3.0.0"], tfe.RegistryModuleVersionStatusRegIngressFailed)
	publishModuleVersion(t, e, id, "4.0.0", "", tfe.RegistryModuleVersionStatusPending)
	return rm
}

const bucketPage = "/app/acme/registry/modules/private/acme/bucket/aws"

// texts are the trimmed texts of the elements matching sel, spaces folded.
func texts(tb *tab, sel string) []string {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[[]string](fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(function(e){return e.innerText.replace(/\s+/g, " ").trim()})`, sel)))
}

// attrs are the attribute name of the elements matching sel.
func attrs(tb *tab, sel, name string) []string {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[[]string](fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(function(e){return e.getAttribute(%q)})`, sel, name)))
}

func wantList(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("%s: %q, want %q", what, got, want)
	}
}

// A member opens a module's page from the registry's list: where it comes
// from, its versions newest first with their states, and the newest ok
// version's usage block (which the real terraform installs the module
// with), inputs (required first, defaults as JSON), outputs, providers and
// resources; picking another version in the list shows that version's.
func TestModulePageFromRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	bucketRegistry(t, e)
	member := userToken(t, e, "acme", "dev@acme.test")
	tb := newTab(t, e, member)

	tb.open("/app/acme/registry")
	tb.press(`#modules a.module[href$="/registry/modules/private/acme/bucket/aws"]`)
	tb.waitLocation(bucketPage)
	if got := tb.text("#module"); got != "bucket aws" {
		t.Fatalf("the page's title: %q", got)
	}
	for sel, want := range map[string]string{
		"#module-namespace": "acme",
		"#module-provider":  "aws",
		"#module-status":    "Setup complete",
		"#module-source":    "versions uploaded through the API",
		"#no-code":          "not enabled",
		"#tests-link":       "off",
	} {
		if got := strings.TrimSpace(tb.text(sel)); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	wantList(t, "versions", attrs(tb, "#versions li", "data-version"), "4.0.0", "3.0.0", "2.0.0", "1.0.0")
	wantList(t, "versions' states", texts(tb, "#versions .state .status"), "pending", "failed", "ok", "ok")
	if got := tb.text(`#versions li[data-version="3.0.0"] .state`); !strings.Contains(got, "module configuration is invalid") {
		t.Fatalf("the refused version's state: %q", got)
	}
	// The newest ok version is shown.
	wantList(t, "the version shown", attrs(tb, "#selected-version", "data-version"), "2.0.0")
	wantList(t, "the version marked shown", attrs(tb, `#versions li[aria-current]`, "data-version"), "2.0.0")
	// terraform wants a dot in a module registry host: the block names
	// the server (localhost in tests) by its IP, and says so.
	host := strings.Replace(e.Host, "localhost", "127.0.0.1", 1)
	wantUsage := `module "bucket" {
  source  = "` + host + `/acme/bucket/aws"
  version = "2.0.0"

  region = ...
  zone   = ...
}`
	usage := tb.text("#usage")
	if usage != wantUsage {
		t.Fatalf("usage block:\n%s\nwant:\n%s", usage, wantUsage)
	}
	if got := tb.text("#source-host-note"); !strings.Contains(got, "127.0.0.1") {
		t.Fatalf("the note on the source's host: %q", got)
	}
	if got := tb.text("#usage-help"); !strings.Contains(got, "terraform login "+host+" ") {
		t.Fatalf("the usage block's help does not log in to its source's host %s: %q", host, got)
	}
	wantList(t, "where the versions come from", texts(tb, "#versions .from"), "uploaded", "uploaded", "uploaded", "uploaded")
	wantList(t, "2.0.0's inputs", attrs(tb, "#inputs tbody tr", "data-name"), "region", "zone", "size")
	wantList(t, "2.0.0's inputs as shown", texts(tb, "#inputs tbody tr"),
		"region required string Where the bucket lives. none", "zone required string none", "size number How many shards. 3")
	wantList(t, "2.0.0's outputs", texts(tb, "#outputs tbody tr"), "id The bucket's ID.", "secret sensitive")
	wantList(t, "2.0.0's providers", texts(tb, "#dependencies tbody tr"), "No providers.")
	wantList(t, "2.0.0's resources", texts(tb, "#resources tbody tr"), "terraform_data.bucket terraform_data")
	tb.screenshot("module-2.0.0")

	// The block, its inputs given, as terraform reads it: terraform get
	// installs version 2.0.0 from this registry (with the member's
	// credentials and the server's CA, as the getting started page says).
	dir := t.TempDir()
	config := strings.ReplaceAll(usage, "= ...", `= "x"`)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", host, member)), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatal("terraform is not on PATH: the test installs the module with it")
	}
	getCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(getCtx, tf, "get", "-no-color")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "SSL_CERT_FILE="+e.CAFile, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("terraform get with the page's block: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ".terraform", "modules", "modules.json"))
	if err != nil {
		t.Fatal(err)
	}
	var installed struct {
		Modules []struct{ Key, Source, Version string }
	}
	if err := json.Unmarshal(raw, &installed); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range installed.Modules {
		found = found || (m.Key == "bucket" && m.Version == "2.0.0" && strings.HasSuffix(m.Source, "/acme/bucket/aws"))
	}
	if !found {
		t.Fatalf("terraform get installed %s", raw)
	}

	// Another version, picked in the list.
	tb.press(`#versions li[data-version="1.0.0"] a.version`)
	tb.waitLocation(bucketPage + "?version=1.0.0")
	wantList(t, "the version shown", attrs(tb, "#selected-version", "data-version"), "1.0.0")
	if got := tb.text("#usage"); !strings.Contains(got, `version = "1.0.0"`) || !strings.Contains(got, "\n  name = ...\n}") {
		t.Fatalf("1.0.0's usage block:\n%s", got)
	}
	wantList(t, "1.0.0's inputs", attrs(tb, "#inputs tbody tr", "data-name"), "name", "tags", "api_key")
	wantList(t, "1.0.0's inputs as shown", texts(tb, "#inputs tbody tr"),
		"name required string The bucket's name. none", `tags map(string) Labels put on the bucket. {"team":"ops"}`, "api_key sensitive string not shown")
	wantList(t, "1.0.0's outputs", texts(tb, "#outputs tbody tr"), "label The bucket's label.")
	wantList(t, "1.0.0's providers", texts(tb, "#dependencies tbody tr"), "random hashicorp/random ~> 3.5")
	tb.screenshot("module-1.0.0")

	// The tests page is a link away, as from the list.
	tb.press(`#tests-link a`)
	tb.waitLocation(bucketPage + "/tests")
	if got := tb.text("#module-tests"); got != "Tests of bucket/aws" {
		t.Fatalf("the tests link led to %q", got)
	}
}

// A refused version shows why; a pending one that it waits; an unknown
// one is a 404 saying so; a module whose only version was refused shows
// that one; and no version's page shows a sensitive input's default.
func TestModulePageVersionStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	bucketRegistry(t, e)
	if _, err := e.Client.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("broken"), Provider: tfe.String("aws")}); err != nil {
		t.Fatal(err)
	}
	publishModuleVersion(t, e, tfe.RegistryModuleID{Organization: "acme", Name: "broken", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry},
		"0.1.0", bucketVersions["3.0.0"], tfe.RegistryModuleVersionStatusRegIngressFailed)
	if _, err := e.Client.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("empty"), Provider: tfe.String("aws")}); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, userToken(t, e, "acme", "dev@acme.test"))

	if st := tb.open(bucketPage + "?version=3.0.0"); st != http.StatusOK {
		t.Fatalf("the refused version's page: %d", st)
	}
	if got := tb.text("#version-error"); !strings.Contains(got, "module configuration is invalid: Unclosed configuration block") {
		t.Fatalf("the refused version's reason: %q", got)
	}
	if tb.exists("#usage") || tb.exists("#inputs") {
		t.Fatal("a refused version shows a usage block or inputs")
	}
	tb.screenshot("refused-version")

	tb.open(bucketPage + "?version=4.0.0")
	if got := tb.text("#version-pending"); !strings.Contains(got, "pending") || tb.exists("#usage") {
		t.Fatalf("the pending version: %q", got)
	}

	if st := tb.open(bucketPage + "?version=9.9.9"); st != http.StatusNotFound {
		t.Fatalf("an unknown version: %d, want 404", st)
	}
	if got := tb.text("#error") + " " + tb.text("p.detail"); !strings.Contains(got, "404") || !strings.Contains(got, "version 9.9.9 of module acme/bucket/aws not found") {
		t.Fatalf("an unknown version's page: %q", got)
	}
	tb.screenshot("unknown-version")

	// Without an ok version, the newest is shown: here, refused.
	tb.open("/app/acme/registry/modules/private/acme/broken/aws")
	if got := tb.text("#version-error"); !strings.Contains(got, "module configuration is invalid") {
		t.Fatalf("the only version, refused: %q", got)
	}
	if got := tb.text("#module-status"); got != "Setup failed" {
		t.Fatalf("a module whose every version was refused: %q", got)
	}
	tb.open("/app/acme/registry/modules/private/acme/empty/aws")
	if got := tb.text("#no-versions"); !strings.Contains(got, "No versions yet") || tb.exists("#selected-version") {
		t.Fatalf("a module without versions: %q", got)
	}

	// No page shows the sensitive input's default, the module's own
	// (selected or not), while its other default shows.
	for _, v := range []string{"", "1.0.0", "2.0.0", "3.0.0", "4.0.0"} {
		p := bucketPage
		if v != "" {
			p += "?version=" + v
		}
		tb.open(p)
		tb.text("#versions")
		if strings.Contains(tb.html(), sensitiveDefault) {
			t.Fatalf("%s shows the sensitive input's default", p)
		}
	}
	tb.open(bucketPage + "?version=1.0.0")
	if got := strings.TrimSpace(tb.text(`#inputs tr[data-name="api_key"] td.default`)); got != "not shown" {
		t.Fatalf("the sensitive input's default cell: %q", got)
	}
}

// Who may not read the organization's registry (a user of another
// organization; an agent token of this one) gets a 404 for the module's
// page and no module data, and does not see it listed; a namespace other
// than the organization's is not found.
func TestModulePageNeedsRegistryRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	testenv.NewOrg(t, e.Client, "other")
	bucketRegistry(t, e)
	pool, err := e.Client.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("pool")})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := e.Client.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("agent")})
	if err != nil {
		t.Fatal(err)
	}
	// What only the module's pages show.
	data := []string{"Where the bucket lives.", "The bucket's ID.", "/acme/bucket/aws"}
	// The user of another organization is told the organization is not
	// found; the agent token, which is of acme, that it may not.
	for _, c := range []struct {
		who, token string
		status     int
	}{
		{"a member", userToken(t, e, "acme", "dev@acme.test"), http.StatusOK},
		{"a user of another organization", userToken(t, e, "other", "stranger@other.test"), http.StatusNotFound},
		{"an agent token", agent.Token, http.StatusForbidden},
	} {
		may := c.status == http.StatusOK
		tb := newTab(t, e, c.token)
		st := tb.open(bucketPage)
		seen := tb.html()
		if st != c.status {
			t.Errorf("%s got %d for the module's page, want %d", c.who, st, c.status)
		}
		for _, s := range data {
			if got := strings.Contains(seen, s); got != may {
				t.Errorf("%s: the module's page shows %q: %v", c.who, s, got)
			}
		}
		listed := tb.open("/app/acme/registry") == http.StatusOK && tb.exists(`#modules a.module[href$="/private/acme/bucket/aws"]`)
		if listed != may {
			t.Errorf("%s: the registry lists the module: %v", c.who, listed)
		}
		if !may {
			tb.screenshot("refused-" + strings.ReplaceAll(c.who, " ", "-"))
		}
	}
	stranger := newTab(t, e, userToken(t, e, "other", "stranger2@other.test"))
	if st := stranger.open("/app/other/registry"); st != http.StatusOK || strings.Contains(stranger.text("#modules"), "bucket") {
		t.Fatalf("the other organization's registry (%d) lists acme's module: %q", st, stranger.text("#modules"))
	}

	admin := newTab(t, e, e.Token)
	for _, p := range []string{"/app/acme/registry/modules/private/other/bucket/aws", "/app/other/registry/modules/private/other/bucket/aws", "/app/acme/registry/modules/private/acme/bucket/gcp"} {
		if st := admin.open(p); st != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, st)
		}
	}
}

// A no-code module's page says so, and offers Provision workspace only to
// those who may provision in some project (as the list does).
func TestModulePageNoCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	rm := bucketRegistry(t, e)
	nc, err := e.Client.RegistryNoCodeModules.Create(ctx, "acme", tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: rm, Enabled: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	builders, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("builders"), Visibility: tfe.String("organization"),
		OrganizationAccess: &tfe.OrganizationAccessOptions{ManageWorkspaces: tfe.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	const provision = `#no-code a.provision`
	form := "/app/acme/no-code/" + nc.ID + "/provision"

	member := newTab(t, e, userToken(t, e, "acme", "member@acme.test"))
	member.open(bucketPage)
	if got := strings.TrimSpace(member.text("#no-code")); got != "ready" {
		t.Fatalf("the no-code state: %q", got)
	}
	if member.exists(provision) {
		t.Fatal("a member who may not create workspaces is offered Provision workspace")
	}
	if st := member.open(form); st != http.StatusForbidden {
		t.Fatalf("the member opened the provision form: %d, want the 403 the link would lead to", st)
	}

	builder := newTab(t, e, userToken(t, e, "acme", "builder@acme.test", builders))
	builder.open(bucketPage)
	builder.screenshot("no-code")
	builder.press(provision)
	builder.waitLocation(form)
	if !builder.exists("#provision") {
		t.Fatal("Provision workspace did not lead to the form")
	}
}

// readmeOfNetwork is a README that renders (heading, emphasis, a table,
// code) and tries what an untrusted README may not: script, an event
// handler, a javascript: link, an ID of the page's own.
const readmeOfNetwork = "# Network module\n\nMakes a **network**.\n\n| input | meaning |\n|---|---|\n| region | where it goes |\n\n" +
	"<script>window.readmeRan = true</script>\n\n<img src=x onerror=\"window.readmeRan = true\">\n\n" +
	"[click](javascript:window.readmeRan=true)\n\n<div id=\"usage\">taken</div>\n\n```hcl\nmodule \"net\" {}\n```\n"

// A version's README: go-tfe reads it as the registry's root readme, and
// the module page renders it as markdown, with none of the README's HTML,
// scripts or dangerous links, its headings under the page's.
func TestModulePageReadme(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	if _, err := e.Client.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("network"), Provider: tfe.String("aws")}); err != nil {
		t.Fatal(err)
	}
	id := tfe.RegistryModuleID{Organization: "acme", Name: "network", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
	publishModuleFiles(t, e, id, "1.0.0", map[string]string{"main.tf": "variable \"region\" {}\n", "README.md": readmeOfNetwork}, tfe.RegistryModuleVersionStatusOk)
	publishModuleFiles(t, e, id, "0.9.0", map[string]string{"main.tf": "variable \"region\" {}\n"}, tfe.RegistryModuleVersionStatusOk)

	rm, err := e.Client.RegistryModules.ReadTerraformRegistryModule(ctx, id, "1.0.0")
	if err != nil || rm.Root.Readme != readmeOfNetwork {
		t.Fatalf("the registry's root readme of 1.0.0: %q, %v; want the README as uploaded", rm.Root.Readme, err)
	}

	tb := newTab(t, e, userToken(t, e, "acme", "dev@acme.test"))
	tb.open("/app/acme/registry/modules/private/acme/network/aws")
	if got := tb.text("#readme h3"); got != "Network module" {
		t.Errorf("the README's first heading: %q, want it as an h3", got)
	}
	if got := tb.text("#readme strong"); got != "network" {
		t.Errorf("the README's emphasis: %q", got)
	}
	wantList(t, "the README's table", texts(tb, "#readme table td"), "region", "where it goes")
	if got := tb.text("#readme pre code"); !strings.Contains(got, `module "net" {}`) {
		t.Errorf("the README's code block: %q", got)
	}
	for _, sel := range []string{"#readme script", "#readme img", "#readme [onerror]", "#readme div", "#readme h1", "#readme h2"} {
		if tb.exists(sel) {
			t.Errorf("the rendered README has %s:\n%s", sel, tb.html())
		}
	}
	if n := must(tb, chromedp.Evaluate[int](`document.querySelectorAll("#usage").length`)); n != 1 {
		t.Errorf("elements with the page's ID usage: %d, want the page's own only", n)
	}
	if href := attrs(tb, "#readme a", "href"); len(href) != 1 || strings.HasPrefix(strings.ToLower(href[0]), "javascript") {
		t.Errorf("the README's javascript: link is written as %q", href)
	}
	if ran := must(tb, chromedp.Evaluate[bool](`window.readmeRan === true`)); ran {
		t.Error("the README's script ran")
	}

	// A version without one shows none.
	tb.open("/app/acme/registry/modules/private/acme/network/aws?version=0.9.0")
	if tb.exists("#readme") || !tb.exists("#usage") {
		t.Errorf("version 0.9.0, which has no README: readme shown %v, usage shown %v", tb.exists("#readme"), tb.exists("#usage"))
	}
}
