package vcs_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/vcs"
)

// TestWebhookDeliveries: what a delivery to a connection's webhook does,
// delivery by delivery, as GitHub and Gitea send them (X-Hub-Signature-256
// over the body, the event in X-GitHub-Event): only a signed push of the
// connection's branch (or, with tags-regex, of a matching tag) or a pull
// request to it is queued; unsigned, wrongly signed and unknown-webhook
// deliveries are refused and queue nothing. (TestVCSDrivenWorkspace in
// internal/e2e has Gitea itself deliver them.)
func TestWebhookDeliveries(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		org := testenv.NewOrg(t, e.Client, "acme").Name
		connect := func(name string, repo vcs.Repo) (url, secret string) {
			t.Helper()
			ws, err := e.Client.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			// The connection as Resolve would answer it (no host runs
			// here: its registration fails, which this test ignores).
			repo.WebhookURL = e.URL + vcs.WebhookPath + "hook" + name
			if err := e.Server.DB.Tx(ctx, func(tx *store.Tx) error { return e.Server.VCS.Connect(ctx, tx, ws.ID, nil, &repo) }); err != nil {
				t.Fatal(err)
			}
			var sealed string
			if err := e.Server.DB.QueryRow(ctx, `SELECT secret FROM vcs_connections WHERE workspace_id = ?`, ws.ID).Scan(&sealed); err != nil {
				t.Fatal(err)
			}
			if secret, err = e.Server.Keys.OpenString(vcs.ConnectionSecretColumn.Purpose, sealed); err != nil || len(secret) != 64 {
				t.Fatalf("the webhook secret: %q, %v", secret, err)
			}
			return repo.WebhookURL, secret
		}
		branchURL, branchSecret := connect("branch", vcs.Repo{Identifier: "acme/infra", Branch: "main", OAuthTokenID: "ot-none"})
		tagURL, tagSecret := connect("tags", vcs.Repo{Identifier: "acme/infra", Branch: "main", OAuthTokenID: "ot-none", TagsRegex: `^v\d+\.\d+$`})
		// Registry modules: one publishing from its version tags, one from
		// its branch (whose versions come through the API only).
		connectModule := func(name string, repo vcs.Repo) (url, secret string) {
			t.Helper()
			m, err := e.Client.RegistryModules.Create(ctx, org, tfe.RegistryModuleCreateOptions{Name: tfe.String(name), Provider: tfe.String("null")})
			if err != nil {
				t.Fatal(err)
			}
			repo.WebhookURL = e.URL + vcs.WebhookPath + "hook" + name
			if err := e.Server.DB.Tx(ctx, func(tx *store.Tx) error { return e.Server.VCS.ConnectModule(ctx, tx, m.ID, &repo, "") }); err != nil {
				t.Fatal(err)
			}
			var sealed string
			if err := e.Server.DB.QueryRow(ctx, `SELECT secret FROM vcs_module_connections WHERE module_id = ?`, m.ID).Scan(&sealed); err != nil {
				t.Fatal(err)
			}
			if secret, err = e.Server.Keys.OpenString(vcs.ModuleConnectionSecretColumn.Purpose, sealed); err != nil {
				t.Fatal(err)
			}
			return repo.WebhookURL, secret
		}
		modTagURL, modTagSecret := connectModule("modtags", vcs.Repo{Identifier: "acme/infra", OAuthTokenID: "ot-none", Tags: true, TagPrefix: "net/"})
		modBranchURL, modBranchSecret := connectModule("modbranch", vcs.Repo{Identifier: "acme/infra", Branch: "main", OAuthTokenID: "ot-none"})
		// One publishing from its branch with tests enabled tests its
		// pushes and pull requests.
		modTestedURL, modTestedSecret := connectModule("modtested", vcs.Repo{Identifier: "acme/infra", Branch: "main", OAuthTokenID: "ot-none"})
		if _, err := e.Client.RegistryModules.Update(ctx, tfe.RegistryModuleID{Organization: org, Name: "modtested", Provider: "null", Namespace: org, RegistryName: tfe.PrivateRegistry},
			tfe.RegistryModuleUpdateOptions{TestConfig: &tfe.RegistryModuleTestConfigOptions{TestsEnabled: tfe.Bool(true)}}); err != nil {
			t.Fatal(err)
		}
		// A policy set follows its branch.
		set, err := e.Client.PolicySets.Create(ctx, org, tfe.PolicySetCreateOptions{Name: tfe.String("guard"), Kind: tfe.OPA})
		if err != nil {
			t.Fatal(err)
		}
		setRepo := vcs.Repo{Identifier: "acme/infra", Branch: "main", OAuthTokenID: "ot-none", WebhookURL: e.URL + vcs.WebhookPath + "hookset"}
		if err := e.Server.DB.Tx(ctx, func(tx *store.Tx) error { return e.Server.VCS.ConnectPolicySet(ctx, tx, set.ID, &setRepo) }); err != nil {
			t.Fatal(err)
		}
		var sealedSet string
		if err := e.Server.DB.QueryRow(ctx, `SELECT secret FROM vcs_policy_set_connections WHERE policy_set_id = ?`, set.ID).Scan(&sealedSet); err != nil {
			t.Fatal(err)
		}
		setSecret, err := e.Server.Keys.OpenString(vcs.PolicySetConnectionSecretColumn.Purpose, sealedSet)
		if err != nil {
			t.Fatal(err)
		}
		setURL := setRepo.WebhookURL

		queued := func() int {
			var n int
			if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM outbox_items WHERE topic = 'vcs' AND (item_key LIKE 'ingress:%' OR item_key LIKE 'pull:%' OR item_key LIKE 'test:%')`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		sha := strings.Repeat("ab", 20)
		var pullFrom func(action, base, headRepo string) string
		push := func(ref string) string {
			return `{"ref":"` + ref + `","before":"` + strings.Repeat("cd", 20) + `","after":"` + sha + `","repository":{"full_name":"acme/infra"},` +
				`"sender":{"login":"alice"},"commits":[{"id":"` + sha + `","message":"m","added":["main.tf"],"removed":[],"modified":[]}],"head_commit":{"id":"` + sha + `","message":"m"}}`
		}
		pull := func(action, base string) string {
			return pullFrom(action, base, "acme/infra")
		}
		pullFrom = func(action, base, headRepo string) string {
			return `{"action":"` + action + `","number":7,"pull_request":{"number":7,"title":"t","html_url":"https://git.test/acme/infra/pulls/7",` +
				`"head":{"ref":"fix","sha":"` + sha + `","repo":{"full_name":"` + headRepo + `"}},"base":{"ref":"` + base + `","sha":"` + strings.Repeat("cd", 20) + `"}},` +
				`"repository":{"full_name":"acme/infra"},"sender":{"login":"alice"}}`
		}
		for _, tc := range []struct {
			name, url, secret, event, body string
			want                           int
			queues                         bool
		}{
			{"unknown webhook", e.URL + vcs.WebhookPath + "nothing", branchSecret, "push", push("refs/heads/main"), http.StatusNotFound, false},
			{"unsigned", branchURL, "", "push", push("refs/heads/main"), http.StatusUnauthorized, false},
			{"signed with another secret", branchURL, tagSecret, "push", push("refs/heads/main"), http.StatusUnauthorized, false},
			{"ping", branchURL, branchSecret, "ping", `{"zen":"x","hook_id":1}`, http.StatusOK, false},
			{"another branch", branchURL, branchSecret, "push", push("refs/heads/dev"), http.StatusOK, false},
			{"a tag, on a branch workspace", branchURL, branchSecret, "push", push("refs/tags/v1.0"), http.StatusOK, false},
			{"a deleted branch", branchURL, branchSecret, "push", strings.Replace(push("refs/heads/main"), `"after":"`+sha, `"after":"`+strings.Repeat("0", 40), 1), http.StatusOK, false},
			{"an issue comment", branchURL, branchSecret, "issue_comment", `{"action":"created"}`, http.StatusOK, false},
			{"the branch", branchURL, branchSecret, "push", push("refs/heads/main"), http.StatusAccepted, true},
			{"a pull request to another branch", branchURL, branchSecret, "pull_request", pull("opened", "dev"), http.StatusOK, false},
			{"a closed pull request", branchURL, branchSecret, "pull_request", pull("closed", "main"), http.StatusOK, false},
			{"a pull request from a fork", branchURL, branchSecret, "pull_request", pullFrom("opened", "main", "mallory/infra"), http.StatusOK, false},
			{"a pull request to the branch", branchURL, branchSecret, "pull_request", pull("opened", "main"), http.StatusAccepted, true},
			{"the branch, on a tags workspace", tagURL, tagSecret, "push", push("refs/heads/main"), http.StatusOK, false},
			{"a tag the regex refuses", tagURL, tagSecret, "push", push("refs/tags/release-1"), http.StatusOK, false},
			{"a matching tag", tagURL, tagSecret, "push", push("refs/tags/v1.2"), http.StatusAccepted, true},
			{"a branch, on a tag module", modTagURL, modTagSecret, "push", push("refs/heads/main"), http.StatusOK, false},
			{"a tag that is no version, on a tag module", modTagURL, modTagSecret, "push", push("refs/tags/nightly"), http.StatusOK, false},
			{"a version tag without the module's prefix", modTagURL, modTagSecret, "push", push("refs/tags/v1.3.0"), http.StatusOK, false},
			{"a pull request, on a tag module", modTagURL, modTagSecret, "pull_request", pull("opened", "main"), http.StatusOK, false},
			{"a version tag of the module", modTagURL, modTagSecret, "push", push("refs/tags/net/v1.3.0"), http.StatusAccepted, true},
			{"the branch, on a branch module", modBranchURL, modBranchSecret, "push", push("refs/heads/main"), http.StatusOK, false},
			{"a version tag, on a branch module", modBranchURL, modBranchSecret, "push", push("refs/tags/v1.3.0"), http.StatusOK, false},
			{"a pull request, on a branch module without tests", modBranchURL, modBranchSecret, "pull_request", pull("opened", "main"), http.StatusOK, false},
			{"another branch, on a tested module", modTestedURL, modTestedSecret, "push", push("refs/heads/dev"), http.StatusOK, false},
			{"a version tag, on a tested module", modTestedURL, modTestedSecret, "push", push("refs/tags/v1.3.0"), http.StatusOK, false},
			{"a pull request from a fork, on a tested module", modTestedURL, modTestedSecret, "pull_request", pullFrom("opened", "main", "mallory/infra"), http.StatusOK, false},
			{"a pull request to another branch, on a tested module", modTestedURL, modTestedSecret, "pull_request", pull("opened", "dev"), http.StatusOK, false},
			{"the branch, on a tested module", modTestedURL, modTestedSecret, "push", push("refs/heads/main"), http.StatusAccepted, true},
			{"a pull request to the branch, on a tested module", modTestedURL, modTestedSecret, "pull_request", pull("opened", "main"), http.StatusAccepted, true},
			{"a pull request, on a policy set", setURL, setSecret, "pull_request", pull("opened", "main"), http.StatusOK, false},
			{"a tag, on a policy set", setURL, setSecret, "push", push("refs/tags/v1.3.0"), http.StatusOK, false},
			{"another branch, on a policy set", setURL, setSecret, "push", push("refs/heads/dev"), http.StatusOK, false},
			{"the branch, on a policy set", setURL, setSecret, "push", push("refs/heads/main"), http.StatusAccepted, true},
		} {
			before := queued()
			req, err := http.NewRequest("POST", tc.url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Event", tc.event)
			if tc.secret != "" {
				mac := hmac.New(sha256.New, []byte(tc.secret))
				mac.Write([]byte(tc.body))
				req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
			}
			res, err := e.HTTP.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Errorf("%s: %d, want %d", tc.name, res.StatusCode, tc.want)
			}
			if got := queued() - before; got != map[bool]int{false: 0, true: 1}[tc.queues] {
				t.Errorf("%s: queued %d commits, want queued %v", tc.name, got, tc.queues)
			}
		}
	})
}
