package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestVCSBackedModule publishes private registry modules from a real
// Gitea over TLS through go-tfe: a module publishing from its version
// tags (the tags there when it is made, then a pushed one, which the real
// terraform CLI then installs and applies), and a monorepo's module
// publishing from a branch (its initial version, then one made through
// the API from a commit), with the refusals and the webhook's removal.
func TestVCSBackedModule(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	eng := engines(t)[0]
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			testVCSBackedModule(t, st, eng)
		})
	}
}

func testVCSBackedModule(t *testing.T, store string, eng testenv.Engine) {
	ctx := context.Background()
	e, g := testenv.NewWithGitea(t, testenv.Options{Store: store})
	module := func(v string) string {
		return fmt.Sprintf("variable \"name\" {\n  type = string\n}\noutput \"greeting\" {\n  value = \"hello ${var.name} from %s\"\n}\n", v)
	}
	repo := g.CreateRepo(t, "terraform-null-greeting")
	first := g.Push(t, repo, "main", map[string]string{"main.tf": module("one"), "README.md": "# greeting\n"}, "first")
	g.PushTag(t, repo, "v1.0.0", first)
	g.PushTag(t, repo, "nightly", first) // not a version: published never
	second := g.Push(t, repo, "main", map[string]string{"main.tf": module("two"), "README.md": "# greeting\n"}, "second")
	g.PushTag(t, repo, "1.1.0", second)

	c := e.Client
	testenv.NewOrg(t, c, "acme")
	oc := g.Provider(t, c, "acme")
	tok := oc.OAuthTokens[0].ID

	// A repository Gitea does not have is refused naming it, and no
	// module is made; so is a repository whose name says no module name
	// when none is given.
	if _, err := c.RegistryModules.CreateWithVCSConnection(ctx, tfe.RegistryModuleCreateWithVCSConnectionOptions{
		VCSRepo: &tfe.RegistryModuleVCSRepoOptions{Identifier: tfe.String("terrace/terraform-null-missing"), OAuthTokenID: tfe.String(tok),
			DisplayIdentifier: tfe.String("terrace/terraform-null-missing")}}); err == nil || !strings.Contains(err.Error(), "terrace/terraform-null-missing") {
		t.Fatalf("a module of a missing repository: %v, want it refused naming the repository", err)
	}
	mono := g.CreateRepo(t, "modules")
	if _, err := c.RegistryModules.CreateWithVCSConnection(ctx, tfe.RegistryModuleCreateWithVCSConnectionOptions{
		VCSRepo: &tfe.RegistryModuleVCSRepoOptions{Identifier: tfe.String(mono), OAuthTokenID: tfe.String(tok), DisplayIdentifier: tfe.String(mono)}}); err == nil ||
		!strings.Contains(err.Error(), "terraform-<PROVIDER>-<NAME>") {
		t.Fatalf("a module of a repository not named for one: %v, want it refused", err)
	}
	if l, err := c.RegistryModules.List(ctx, "acme", nil); err != nil || len(l.Items) != 0 {
		t.Fatalf("modules after the refusals: %v %v, want none", l, err)
	}

	// A module publishing from tags (go-tfe's legacy POST registry-modules:
	// the organization is the token's).
	rm, err := c.RegistryModules.CreateWithVCSConnection(ctx, tfe.RegistryModuleCreateWithVCSConnectionOptions{
		VCSRepo: &tfe.RegistryModuleVCSRepoOptions{Identifier: tfe.String(repo), OAuthTokenID: tfe.String(tok), DisplayIdentifier: tfe.String(repo)}})
	if err != nil {
		t.Fatal(err)
	}
	vr := rm.VCSRepo
	if rm.Name != "greeting" || rm.Provider != "null" || rm.Organization.Name != "acme" || rm.PublishingMechanism != tfe.PublishingMechanismTag ||
		vr == nil || vr.Identifier != repo || vr.OAuthTokenID != tok || vr.ServiceProvider != "gitea" || vr.Branch != "" || !vr.Tags ||
		vr.RepositoryHTTPURL != g.URL+"/"+repo || !strings.HasPrefix(vr.WebhookURL, e.URL+"/webhooks/vcs/") {
		t.Fatalf("the module: %+v, vcs-repo %+v", rm, vr)
	}
	id := tfe.RegistryModuleID{Organization: "acme", Namespace: "acme", Name: "greeting", Provider: "null", RegistryName: tfe.PrivateRegistry}
	versions := func(id tfe.RegistryModuleID) map[string]string {
		m, err := c.RegistryModules.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, v := range m.VersionStatuses {
			out[v.Version] = string(v.Status)
		}
		return out
	}
	waitFor(t, 60*time.Second, "versions 1.0.0 and 1.1.0 from the tags", func() bool {
		v := versions(id)
		return v["1.0.0"] == "ok" && v["1.1.0"] == "ok"
	})
	if v := versions(id); len(v) != 2 {
		t.Fatalf("versions %v, want 1.0.0 and 1.1.0 only (nightly is no version)", v)
	}
	if m, _ := c.RegistryModules.Read(ctx, id); m.Status != tfe.RegistryModuleStatusSetupComplete {
		t.Fatalf("module status %s, want setup_complete", m.Status)
	}
	var hooks []struct {
		ID     int64             `json:"id"`
		Config map[string]string `json:"config"`
	}
	waitFor(t, 30*time.Second, "Terrace's webhook at Gitea", func() bool {
		hooks = nil
		g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
		return len(hooks) == 1 && hooks[0].Config["url"] == vr.WebhookURL
	})
	// A module publishing from tags takes no version through the API.
	if _, err := c.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("9.0.0")}); err == nil ||
		!strings.Contains(err.Error(), "push a tag") {
		t.Fatalf("creating a version of a tag module: %v, want it refused", err)
	}

	// A pushed version tag publishes its version (Gitea's webhook); the
	// real CLI installs it from the registry and applies it.
	third := g.Push(t, repo, "main", map[string]string{"main.tf": module("three")}, "third")
	g.PushTag(t, repo, "v1.2.0", third)
	waitFor(t, 60*time.Second, "version 1.2.0 from the pushed tag", func() bool { return versions(id)["1.2.0"] == "ok" })
	v12, err := c.RegistryModules.ReadVersion(ctx, id, "1.2.0")
	if err != nil {
		t.Fatal(err)
	}
	if v12.Source != "gitea" {
		t.Fatalf("version 1.2.0's source %q, want gitea", v12.Source)
	}
	var raw struct {
		Data struct {
			Attributes map[string]any `json:"attributes"`
		} `json:"data"`
	}
	api(t, e, "GET", "/api/v2/organizations/acme/registry-modules/private/acme/greeting/null/version?module_version=1.2.0", http.StatusOK, &raw)
	if raw.Data.Attributes["commit-sha"] != third {
		t.Fatalf("version 1.2.0 is of commit %v, want %s", raw.Data.Attributes["commit-sha"], third)
	}
	cl := newEngineCLI(t, e, eng)
	host := strings.Replace(e.Host, "localhost", "127.0.0.1", 1)
	rc := filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", host, e.Token)), 0o600); err != nil {
		t.Fatal(err)
	}
	cl.env = append(cl.env, "TF_CLI_CONFIG_FILE="+rc)
	dir := writeConfig(t, map[string]string{"main.tf": fmt.Sprintf("module \"g\" {\n  source  = \"%s/acme/greeting/null\"\n  version = \"~> 1.1\"\n  name    = \"ops\"\n}\noutput \"greeting\" { value = module.g.greeting }\n", host)})
	cl.run(dir, "init")
	cl.run(dir, "apply", "-auto-approve")
	var outs map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(cl.run(dir, "output", "-json")), &outs); err != nil {
		t.Fatal(err)
	}
	if outs["greeting"].Value != "hello ops from three" {
		t.Fatalf("the module's output %v, want the pushed tag's (hello ops from three)", outs["greeting"].Value)
	}

	// A repository without version tags leaves its module no_version_tags.
	bare := g.CreateRepo(t, "terraform-null-bare")
	g.Push(t, bare, "main", map[string]string{"main.tf": module("bare")}, "only")
	if _, err := c.RegistryModules.CreateWithVCSConnection(ctx, tfe.RegistryModuleCreateWithVCSConnectionOptions{
		VCSRepo: &tfe.RegistryModuleVCSRepoOptions{Identifier: tfe.String(bare), OAuthTokenID: tfe.String(tok), DisplayIdentifier: tfe.String(bare)}}); err != nil {
		t.Fatal(err)
	}
	bareID := tfe.RegistryModuleID{Organization: "acme", Namespace: "acme", Name: "bare", Provider: "null", RegistryName: tfe.PrivateRegistry}
	waitFor(t, 60*time.Second, "the bare module's no_version_tags", func() bool {
		m, err := c.RegistryModules.Read(ctx, bareID)
		return err == nil && m.Status == tfe.RegistryModuleStatusNoVersionTags
	})

	// Switched to its branch, the bare module publishes its head as 0.0.0.
	if m, err := c.RegistryModules.Update(ctx, bareID, tfe.RegistryModuleUpdateOptions{
		VCSRepo: &tfe.RegistryModuleVCSRepoUpdateOptions{Branch: tfe.String("main")}}); err != nil ||
		m.PublishingMechanism != tfe.PublishingMechanismBranch || m.VCSRepo.Branch != "main" || m.VCSRepo.Tags {
		t.Fatalf("switching the bare module to its branch: %v %+v", err, m)
	}
	waitFor(t, 60*time.Second, "the bare module's 0.0.0", func() bool { return versions(bareID)["0.0.0"] == "ok" })

	// A monorepo's module publishing from a branch, from its folder: the
	// initial version of the branch's head, then a version of a commit.
	g.Push(t, mono, "main", map[string]string{"src/net/main.tf": module("net-one"), "src/other/main.tf": "# another module\n"}, "net one")
	nm, err := c.RegistryModules.CreateWithVCSConnection(ctx, tfe.RegistryModuleCreateWithVCSConnectionOptions{
		Name: tfe.String("net"), Provider: tfe.String("null"), InitialVersion: tfe.String("0.1.0"),
		VCSRepo: &tfe.RegistryModuleVCSRepoOptions{Identifier: tfe.String(mono), OAuthTokenID: tfe.String(tok), DisplayIdentifier: tfe.String(mono),
			OrganizationName: tfe.String("acme"), Branch: tfe.String("main"), SourceDirectory: tfe.String("src/net")}})
	if err != nil {
		t.Fatal(err)
	}
	if nm.PublishingMechanism != tfe.PublishingMechanismBranch || nm.VCSRepo.Branch != "main" || nm.VCSRepo.Tags || nm.VCSRepo.SourceDirectory != "src/net" {
		t.Fatalf("the branch module: %+v, vcs-repo %+v", nm, nm.VCSRepo)
	}
	netID := tfe.RegistryModuleID{Organization: "acme", Namespace: "acme", Name: "net", Provider: "null", RegistryName: tfe.PrivateRegistry}
	waitFor(t, 60*time.Second, "the initial version 0.1.0", func() bool { return versions(netID)["0.1.0"] == "ok" })
	netSHA := g.Push(t, mono, "main", map[string]string{"src/net/main.tf": module("net-two"), "src/other/main.tf": "# another module\n"}, "net two")
	nv, err := c.RegistryModules.CreateVersion(ctx, netID, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("0.2.0"), CommitSHA: tfe.String(netSHA)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := nv.Links["upload"]; ok {
		t.Fatalf("a branch module's version offers an upload link: %v", nv.Links)
	}
	waitFor(t, 60*time.Second, "version 0.2.0 of the commit", func() bool { return versions(netID)["0.2.0"] == "ok" })
	dir2 := writeConfig(t, map[string]string{"main.tf": fmt.Sprintf("module \"n\" {\n  source  = \"%s/acme/net/null\"\n  version = \"0.2.0\"\n  name    = \"edge\"\n}\noutput \"greeting\" { value = module.n.greeting }\n", host)})
	cl.run(dir2, "init")
	cl.run(dir2, "apply", "-auto-approve")
	if err := json.Unmarshal([]byte(cl.run(dir2, "output", "-json")), &outs); err != nil {
		t.Fatal(err)
	}
	if outs["greeting"].Value != "hello edge from net-two" {
		t.Fatalf("the monorepo module's output %v, want hello edge from net-two (its folder of the commit)", outs["greeting"].Value)
	}
	commits, err := c.RegistryModules.ListCommits(ctx, netID)
	if err != nil {
		t.Fatal(err)
	}
	if len(commits.Items) != 2 || commits.Items[0].Sha != netSHA || !strings.Contains(commits.Items[0].Message, "net two") {
		t.Fatalf("the branch's commits: %d, first %+v; want 2, newest %s", len(commits.Items), commits.Items[0], netSHA)
	}

	// Deleting the tag module removes its webhook from Gitea; deleting the
	// VCS provider disconnects the others, which keep their versions.
	if err := c.RegistryModules.DeleteByName(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the webhook's removal from Gitea", func() bool {
		hooks = nil
		return g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks) == http.StatusOK && len(hooks) == 0
	})
	waitFor(t, 30*time.Second, "the branch module's webhook at Gitea", func() bool {
		hooks = nil
		return g.Do(t, "GET", "/repos/"+mono+"/hooks", nil, &hooks) == http.StatusOK && len(hooks) == 1
	})
	if err := c.OAuthClients.Delete(ctx, oc.ID); err != nil {
		t.Fatal(err)
	}
	if m, err := c.RegistryModules.Read(ctx, netID); err != nil || m.VCSRepo != nil || m.PublishingMechanism != "" || versions(netID)["0.2.0"] != "ok" {
		t.Fatalf("the branch module after its provider's deletion: %v %+v, want no vcs-repo and its versions", err, m)
	}
	waitFor(t, 30*time.Second, "the branch module's webhook's removal from Gitea after its provider's deletion", func() bool {
		hooks = nil
		return g.Do(t, "GET", "/repos/"+mono+"/hooks", nil, &hooks) == http.StatusOK && len(hooks) == 0
	})
}
