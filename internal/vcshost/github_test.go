package vcshost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/terracehq/terrace/internal/vcshost"
)

const ghToken = "ghp_t0ps3cr3tT0k3nValue"

// request is what the fake GitHub saw.
type request struct {
	method, path string
	header       http.Header
	body         map[string]any
}

// fakeGitHub answers the few GitHub REST v3 calls vcshost makes, as
// GitHub's documentation describes them, and records each request. GitHub
// itself cannot be reached from the tests: this checks the requests'
// shapes and the decoding of documented answers, not GitHub's behaviour.
func fakeGitHub(t *testing.T) (*vcshost.Host, func() []request) {
	t.Helper()
	var mu sync.Mutex
	var seen []request
	const sha = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if len(b) > 0 {
			if err := json.Unmarshal(b, &body); err != nil {
				t.Errorf("%s %s: the body is not JSON: %s", r.Method, r.URL.Path, b)
			}
		}
		mu.Lock()
		seen = append(seen, request{r.Method, r.URL.EscapedPath(), r.Header.Clone(), body})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if r.Header.Get("Authorization") != "Bearer "+ghToken {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"message": "Bad credentials %s", "documentation_url": "https://docs.github.com/rest"}`, r.Header.Get("Authorization"))
			return
		}
		switch p := r.Method + " " + r.URL.EscapedPath(); p {
		case "GET /api/v3/repos/acme/infra":
			fmt.Fprint(w, `{"id": 1296269, "full_name": "acme/infra", "private": true, "default_branch": "trunk"}`)
		case "GET /api/v3/repos/acme/infra/branches/feature/x":
			fmt.Fprintf(w, `{"name": "feature/x", "commit": {"sha": %q, "html_url": "https://ghe.example/acme/infra/commit/%[1]s",
			  "commit": {"message": "Fix all the bugs", "author": {"name": "Monalisa Octocat", "email": "support@github.com"}},
			  "author": {"login": "octocat"}}, "protected": false}`, sha)
		case "POST /api/v3/repos/acme/infra/hooks":
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"type": "Repository", "id": 12345678, "name": "web", "active": true, "events": ["push", "pull_request"]}`)
		case "GET /api/v3/repos/acme/infra/hooks":
			if q := r.URL.Query(); q.Get("per_page") != "100" || q.Get("page") != "1" {
				t.Errorf("listing webhooks with %q, want per_page=100&page=1", r.URL.RawQuery)
			}
			fmt.Fprint(w, `[{"type": "Repository", "id": 12345678, "name": "web", "active": true, "events": ["push"],
			  "config": {"content_type": "json", "insecure_ssl": "0", "url": "https://terrace.example/webhooks/vcs/ot-1"}},
			  {"type": "Repository", "id": 87654321, "name": "web", "active": true, "events": ["push"],
			  "config": {"content_type": "json", "insecure_ssl": "0", "url": "https://ci.example/hook"}}]`)
		case "DELETE /api/v3/repos/acme/infra/hooks/12345678":
			w.WriteHeader(http.StatusNoContent)
		case "POST /api/v3/repos/acme/infra/statuses/" + sha:
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"id": 1, "state": "success"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}`)
		}
	}))
	t.Cleanup(srv.Close)
	h, err := vcshost.New(vcshost.Host{Kind: vcshost.GitHubEnterprise, HTTPURL: srv.URL, Token: ghToken, Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return h, func() []request {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

// TestGitHubRequests: each call's method, path, headers and body are
// GitHub REST v3's, and its answers are decoded.
func TestGitHubRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, requests := fakeGitHub(t)
	const sha = "6dcb09b5b57875f334f61aebed695e2e4193db5e"

	c, err := h.Branch(ctx, "acme/infra", "feature/x")
	if err != nil {
		t.Fatal(err)
	}
	want := &vcshost.Commit{SHA: sha, Message: "Fix all the bugs", Author: "Monalisa Octocat", URL: "https://ghe.example/acme/infra/commit/" + sha}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("Branch = %+v, want %+v", c, want)
	}
	r := requests()
	if len(r) != 1 || r[0].method != "GET" || r[0].path != "/api/v3/repos/acme/infra/branches/feature/x" {
		t.Fatalf("Branch requested %+v", r)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + ghToken, "Accept": "application/vnd.github+json", "X-Github-Api-Version": "2022-11-28"} {
		if got := r[0].header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}

	if b, err := h.DefaultBranch(ctx, "acme/infra"); err != nil || b != "trunk" {
		t.Fatalf("DefaultBranch = %q, %v", b, err)
	}
	requests()

	id, err := h.CreateHook(ctx, "acme/infra", "https://terrace.example/webhooks/vcs/ot-1", "hook-secret")
	if err != nil || id != "12345678" {
		t.Fatalf("CreateHook = %q, %v", id, err)
	}
	r = requests()
	wantHook := map[string]any{"name": "web", "active": true, "events": []any{"push", "pull_request"},
		"config": map[string]any{"url": "https://terrace.example/webhooks/vcs/ot-1", "content_type": "json", "secret": "hook-secret", "insecure_ssl": "0"}}
	if len(r) != 1 || r[0].method != "POST" || r[0].path != "/api/v3/repos/acme/infra/hooks" || !reflect.DeepEqual(r[0].body, wantHook) {
		t.Fatalf("CreateHook requested %+v", r)
	}
	if ct := r[0].header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("CreateHook's content type %q", ct)
	}

	if ids, err := h.HooksTo(ctx, "acme/infra", "https://terrace.example/webhooks/vcs/ot-1"); err != nil || !reflect.DeepEqual(ids, []string{"12345678"}) {
		t.Fatalf("HooksTo = %v, %v (want the one webhook delivering there)", ids, err)
	}
	if r = requests(); len(r) != 1 || r[0].method != "GET" || r[0].path != "/api/v3/repos/acme/infra/hooks" {
		t.Fatalf("HooksTo requested %+v", r)
	}

	long := strings.Repeat("é", 200)
	if err := h.SetStatus(ctx, "acme/infra", sha, vcshost.Status{State: "success", Context: "Terraform Cloud/acme/app", Description: long, TargetURL: "https://terrace.example/app/acme/workspaces/app/runs/run-1"}); err != nil {
		t.Fatal(err)
	}
	r = requests()
	if len(r) != 1 || r[0].method != "POST" || r[0].path != "/api/v3/repos/acme/infra/statuses/"+sha {
		t.Fatalf("SetStatus requested %+v", r)
	}
	d, _ := r[0].body["description"].(string)
	if r[0].body["state"] != "success" || r[0].body["context"] != "Terraform Cloud/acme/app" || r[0].body["target_url"] != "https://terrace.example/app/acme/workspaces/app/runs/run-1" ||
		utf8.RuneCountInString(d) != vcshost.MaxDescription || !strings.HasPrefix(long, strings.TrimSuffix(d, "…")) {
		t.Fatalf("SetStatus sent %v", r[0].body)
	}

	if err := h.DeleteHook(ctx, "acme/infra", "12345678"); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteHook(ctx, "acme/infra", "999"); err != nil {
		t.Fatalf("DeleteHook of a hook already gone: %v", err)
	}
	r = requests()
	if len(r) != 2 || r[0].method != "DELETE" || r[0].path != "/api/v3/repos/acme/infra/hooks/12345678" || r[1].path != "/api/v3/repos/acme/infra/hooks/999" {
		t.Fatalf("DeleteHook requested %+v", r)
	}
	if got := h.CloneURL("acme/infra"); got != h.HTTPURL+"/acme/infra.git" {
		t.Fatalf("CloneURL = %q", got)
	}
}

// TestGitHubErrors: the host's refusals are worded for the caller, match
// ErrNotFound or ErrUnauthorized, and never show the token; arguments
// that would make another request are refused before any is made.
func TestGitHubErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, requests := fakeGitHub(t)

	_, err := h.Branch(ctx, "acme/missing", "main")
	if !errors.Is(err, vcshost.ErrNotFound) || !strings.Contains(err.Error(), "repository acme/missing not found or the token cannot read it") || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a missing repository: %v", err)
	}
	_, err = h.Branch(ctx, "acme/infra", "nope")
	if !errors.Is(err, vcshost.ErrNotFound) || !strings.Contains(err.Error(), "branch nope not found in acme/infra") {
		t.Fatalf("a missing branch: %v", err)
	}
	if _, err := h.CreateHook(ctx, "acme/missing", "https://terrace.example/h", "s"); !strings.Contains(err.Error(), "repository acme/missing not found") {
		t.Fatalf("a hook on a missing repository: %v", err)
	}
	requests()

	bad := *h
	bad.Token = "ghp_wr0ngT0k3n"
	_, err = bad.DefaultBranch(ctx, "acme/infra")
	var he *vcshost.HostError
	if !errors.As(err, &he) || he.Status != http.StatusUnauthorized || !errors.Is(err, vcshost.ErrUnauthorized) || errors.Is(err, vcshost.ErrNotFound) {
		t.Fatalf("a wrong token: %v", err)
	}
	// The fake echoes the token in its message: the error does not.
	if strings.Contains(err.Error(), bad.Token) || !strings.Contains(err.Error(), "Bad credentials") {
		t.Fatalf("a wrong token's error %q", err)
	}
	for _, s := range []string{fmt.Sprint(h), fmt.Sprintf("%+v", *h), fmt.Sprintf("%#v", h), fmt.Sprintf("%v", []*vcshost.Host{h})} {
		if strings.Contains(s, ghToken) || !strings.Contains(s, "[redacted]") {
			t.Fatalf("a Host printed: %s", s)
		}
	}
	requests()

	for name, call := range map[string]func() error{
		"repo without owner": func() error { _, err := h.Branch(ctx, "infra", "main"); return err },
		"repo with a path":   func() error { _, err := h.DefaultBranch(ctx, "acme/infra/../x"); return err },
		"dot-dot owner":      func() error { _, err := h.DefaultBranch(ctx, "../infra"); return err },
		"no branch":          func() error { _, err := h.Branch(ctx, "acme/infra", ""); return err },
		"hook id path":       func() error { return h.DeleteHook(ctx, "acme/infra", "1/../../x") },
		"hook without secret": func() error {
			_, err := h.CreateHook(ctx, "acme/infra", "https://terrace.example/h", "")
			return err
		},
		"hook URL with credentials": func() error {
			_, err := h.CreateHook(ctx, "acme/infra", "https://u:p@terrace.example/h", "s")
			return err
		},
		"short sha": func() error { return h.SetStatus(ctx, "acme/infra", "6dcb09b", vcshost.Status{State: "success"}) },
		"bad state": func() error {
			return h.SetStatus(ctx, "acme/infra", strings.Repeat("a", 40), vcshost.Status{State: "ok"})
		},
		"upper sha": func() error {
			return h.SetStatus(ctx, "acme/infra", strings.Repeat("A", 40), vcshost.Status{State: "success"})
		},
		"archive ref": func() error { _, err := h.Archive(ctx, "acme/infra", "--upload-pack=touch x", 1<<20); return err },
	} {
		if call() == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if r := requests(); len(r) != 0 {
		t.Fatalf("refused arguments made requests: %+v", r)
	}
}

// TestNew: the kinds, and the URLs New fills in or refuses.
func TestNew(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"github", "github_enterprise", "gitea", "forgejo"} {
		if !vcshost.Known(k) {
			t.Errorf("Known(%q) = false", k)
		}
	}
	for _, k := range []string{"", "gitlab_hosted", "bitbucket_server", "ado_services", "GitHub"} {
		if vcshost.Known(k) {
			t.Errorf("Known(%q) = true", k)
		}
	}
	for _, tc := range []struct {
		in           vcshost.Host
		api, httpURL string
	}{
		{vcshost.Host{Kind: vcshost.GitHub}, "https://api.github.com", "https://github.com"},
		{vcshost.Host{Kind: vcshost.GitHubEnterprise, HTTPURL: "https://ghe.example/"}, "https://ghe.example/api/v3", "https://ghe.example"},
		{vcshost.Host{Kind: vcshost.Gitea, HTTPURL: "https://git.example"}, "https://git.example/api/v1", "https://git.example"},
		{vcshost.Host{Kind: vcshost.Forgejo, HTTPURL: "https://code.example/forgejo"}, "https://code.example/forgejo/api/v1", "https://code.example/forgejo"},
		{vcshost.Host{Kind: vcshost.Gitea, HTTPURL: "https://git.example", APIURL: "https://api.git.example/v1/"}, "https://api.git.example/v1", "https://git.example"},
	} {
		h, err := vcshost.New(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if h.APIURL != tc.api || h.HTTPURL != tc.httpURL || h.Client == nil {
			t.Errorf("New(%v) = %v", tc.in, h)
		}
	}
	for name, in := range map[string]vcshost.Host{
		"unknown kind":       {Kind: "gitlab_hosted", HTTPURL: "https://gitlab.example"},
		"no URL":             {Kind: vcshost.Gitea},
		"credentials in URL": {Kind: vcshost.Gitea, HTTPURL: "https://user:pass@git.example"},
		"ssh URL":            {Kind: vcshost.GitHubEnterprise, HTTPURL: "ssh://git.example"},
		"bad CA":             {Kind: vcshost.Gitea, HTTPURL: "https://git.example", CA: []byte("not PEM")},
	} {
		if h, err := vcshost.New(in); err == nil {
			t.Errorf("%s: New = %v, want an error", name, h)
		}
	}
}
