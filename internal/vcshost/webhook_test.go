package vcshost_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/vcshost"
)

func sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// githubPush is a push as GitHub shapes it (its documented fields, two
// commits, no total_commits).
const githubPush = `{
  "ref": "refs/heads/main",
  "before": "1111111111111111111111111111111111111111",
  "after": "2222222222222222222222222222222222222222",
  "created": false, "deleted": false, "forced": false,
  "commits": [
    {"id": "1212121212121212121212121212121212121212", "message": "a", "added": ["b.tf"], "removed": [], "modified": ["main.tf"]},
    {"id": "2222222222222222222222222222222222222222", "message": "b", "added": [], "removed": ["old/x.tf"], "modified": ["main.tf"]}
  ],
  "head_commit": {"id": "2222222222222222222222222222222222222222", "message": "b", "url": "https://github.com/acme/infra/commit/2222222222222222222222222222222222222222", "author": {"name": "Ada", "email": "ada@example.com", "username": "ada"}},
  "repository": {"id": 1, "name": "infra", "full_name": "acme/infra", "private": true},
  "sender": {"login": "ada", "id": 7}
}`

func githubHeader(event, sig string) http.Header {
	h := http.Header{}
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	h.Set("Content-Type", "application/json")
	if sig != "" {
		h.Set("X-Hub-Signature-256", sig)
	}
	return h
}

// TestParseWebhookSignatures: a delivery is decoded only with a signature
// of exactly its body under the secret; every other case is refused with
// an error saying why.
func TestParseWebhookSignatures(t *testing.T) {
	t.Parallel()
	const secret = "It's a Secret to Everybody"
	body := []byte(githubPush)
	good := "sha256=" + sign(secret, body)
	if _, err := vcshost.ParseWebhook(githubHeader("push", good), body, secret); err != nil {
		t.Fatalf("a good signature: %v", err)
	}
	// GitHub's own example: the documented secret, body and signature.
	example := []byte("Hello, World!")
	exampleHeader := githubHeader("ping", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	if _, err := vcshost.ParseWebhook(exampleHeader, example, secret); err == nil || errors.Is(err, vcshost.ErrBadSignature) {
		t.Fatalf("GitHub's example signature: %v, want it verified (and the body refused as not JSON)", err)
	}
	tampered := []byte(strings.Replace(githubPush, "refs/heads/main", "refs/heads/prod", 1))
	upper := "sha256=" + strings.ToUpper(sign(secret, body))
	for _, tc := range []struct {
		name   string
		header http.Header
		body   []byte
		secret string
		want   error
		says   string
	}{
		{"missing", githubHeader("push", ""), body, secret, vcshost.ErrUnsigned, "not signed"},
		{"no prefix", githubHeader("push", sign(secret, body)), body, secret, vcshost.ErrBadSignature, "sha256="},
		{"sha1", githubHeader("push", "sha1="+sign(secret, body)), body, secret, vcshost.ErrBadSignature, "sha256="},
		{"bad hex", githubHeader("push", "sha256=zz"+sign(secret, body)[2:]), body, secret, vcshost.ErrBadSignature, "hex"},
		{"short", githubHeader("push", good[:len(good)-2]), body, secret, vcshost.ErrBadSignature, "hex"},
		{"empty", githubHeader("push", "sha256="), body, secret, vcshost.ErrBadSignature, "hex"},
		{"tampered body", githubHeader("push", good), tampered, secret, vcshost.ErrBadSignature, "does not match"},
		{"wrong secret", githubHeader("push", good), body, secret + "!", vcshost.ErrBadSignature, "does not match"},
		{"no secret", githubHeader("push", "sha256="+sign("", body)), body, "", nil, "no webhook secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := vcshost.ParseWebhook(tc.header, tc.body, tc.secret)
			if err == nil || ev != nil {
				t.Fatalf("ParseWebhook = %+v, %v: want it refused", ev, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not say %q", err, tc.says)
			}
		})
	}
	// Hex is hex in either case.
	if _, err := vcshost.ParseWebhook(githubHeader("push", upper), body, secret); err != nil {
		t.Fatalf("an upper-case signature: %v", err)
	}
	// Gitea's bare-hex header alone is enough; a wrong one is refused.
	h := http.Header{}
	h.Set("X-Gitea-Event", "push")
	h.Set("X-Gitea-Signature", sign(secret, body))
	if ev, err := vcshost.ParseWebhook(h, body, secret); err != nil || ev.Branch != "main" {
		t.Fatalf("X-Gitea-Signature: %+v, %v", ev, err)
	}
	h.Set("X-Gitea-Signature", sign(secret, tampered))
	if _, err := vcshost.ParseWebhook(h, body, secret); !errors.Is(err, vcshost.ErrBadSignature) {
		t.Fatalf("a wrong X-Gitea-Signature: %v", err)
	}
	// X-Hub-Signature-256, when there, is the one checked.
	h.Set("X-Hub-Signature-256", good)
	if _, err := vcshost.ParseWebhook(h, body, secret); err != nil {
		t.Fatalf("X-Hub-Signature-256 beside a wrong X-Gitea-Signature: %v", err)
	}
}

// TestParseWebhookBodies: what a signed delivery decodes to, and which
// signed bodies are still refused.
func TestParseWebhookBodies(t *testing.T) {
	t.Parallel()
	const secret = "s"
	parse := func(event, body string) (*vcshost.Event, error) {
		return vcshost.ParseWebhook(githubHeader(event, "sha256="+sign(secret, []byte(body))), []byte(body), secret)
	}
	ev, err := parse("push", githubPush)
	if err != nil {
		t.Fatal(err)
	}
	want := &vcshost.Event{
		Kind: "push", Delivery: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Repo: "acme/infra", Sender: "ada",
		Branch: "main", SHA: "2222222222222222222222222222222222222222", Before: "1111111111111111111111111111111111111111",
		Changed: []string{"b.tf", "main.tf", "old/x.tf"},
		HeadCommit: &vcshost.Commit{SHA: "2222222222222222222222222222222222222222", Message: "b", Author: "Ada",
			URL: "https://github.com/acme/infra/commit/2222222222222222222222222222222222222222"},
	}
	if !reflect.DeepEqual(ev, want) {
		t.Fatalf("push = %+v\nwant %+v", ev, want)
	}

	tag := strings.Replace(githubPush, "refs/heads/main", "refs/tags/v1.2.0", 1)
	if ev, err := parse("push", tag); err != nil || ev.Tag != "v1.2.0" || ev.Branch != "" {
		t.Fatalf("tag push = %+v, %v", ev, err)
	}
	deleted := `{"ref": "refs/heads/old", "before": "1111111111111111111111111111111111111111", "after": "0000000000000000000000000000000000000000", "deleted": true, "commits": [], "head_commit": null, "repository": {"full_name": "acme/infra"}, "sender": {"login": "ada"}}`
	if ev, err := parse("push", deleted); err != nil || !ev.Deleted || ev.Branch != "old" || ev.SHA != vcshost.ZeroSHA || ev.HeadCommit != nil {
		t.Fatalf("branch deletion = %+v, %v", ev, err)
	}
	// Gitea's: total_commits above the commits listed.
	gitea := `{"ref": "refs/heads/main", "before": "1111111111111111111111111111111111111111", "after": "2222222222222222222222222222222222222222", "total_commits": 7, "commits": [{"id": "2222222222222222222222222222222222222222", "added": ["a.tf"], "removed": [], "modified": []}], "repository": {"full_name": "acme/infra"}, "sender": {"login": "ada", "username": "ada"}}`
	if ev, err := parse("push", gitea); err != nil || !ev.Truncated || !reflect.DeepEqual(ev.Changed, []string{"a.tf"}) {
		t.Fatalf("a truncated push = %+v, %v", ev, err)
	}

	pr := `{"action": "synchronized", "number": 4, "pull_request": {"number": 4, "title": "T", "html_url": "https://git.example/acme/infra/pulls/4", "merged": false,
	  "head": {"ref": "feature", "sha": "3333333333333333333333333333333333333333", "repo": {"full_name": "fork/infra"}},
	  "base": {"ref": "main", "sha": "1111111111111111111111111111111111111111", "repo": {"full_name": "acme/infra"}}},
	  "repository": {"full_name": "acme/infra"}, "sender": {"login": "bob"}}`
	ev, err = parse("pull_request", pr)
	if err != nil {
		t.Fatal(err)
	}
	wantPR := &vcshost.PullRequest{Action: "synchronize", Number: 4, Title: "T", URL: "https://git.example/acme/infra/pulls/4",
		Head: "feature", HeadSHA: "3333333333333333333333333333333333333333", HeadRepo: "fork/infra",
		Base: "main", BaseSHA: "1111111111111111111111111111111111111111"}
	if ev.Kind != "pull_request" || ev.SHA != wantPR.HeadSHA || ev.Sender != "bob" || !reflect.DeepEqual(ev.PR, wantPR) {
		t.Fatalf("pull request = %+v %+v", ev, ev.PR)
	}
	if ev, err := parse("ping", `{"zen": "Keep it logically awesome.", "hook_id": 1, "repository": {"full_name": "acme/infra"}, "sender": {"login": "ada"}}`); err != nil || ev.Kind != "ping" || ev.Repo != "acme/infra" {
		t.Fatalf("ping = %+v, %v", ev, err)
	}
	if ev, err := parse("issues", `{"action": "opened", "repository": {"full_name": "acme/infra"}}`); err != nil || ev.Kind != "issues" || ev.PR != nil || ev.SHA != "" {
		t.Fatalf("another event = %+v, %v", ev, err)
	}

	for name, body := range map[string]string{
		"form encoded":    "payload=" + githubPush,
		"trailing data":   githubPush + "{}",
		"an array":        "[" + githubPush + "]",
		"truncated":       githubPush[:len(githubPush)/2],
		"wrong types":     strings.Replace(githubPush, `"ref": "refs/heads/main"`, `"ref": 5`, 1),
		"no commit":       strings.Replace(githubPush, `"after": "2222222222222222222222222222222222222222"`, `"after": "main"`, 1),
		"no repository":   strings.Replace(githubPush, `"full_name": "acme/infra"`, `"full_name": ""`, 1),
		"another ref":     strings.Replace(githubPush, "refs/heads/main", "refs/pull/1/head", 1),
		"empty":           "",
		"pr without head": `{"action": "opened", "pull_request": {"number": 1}, "repository": {"full_name": "acme/infra"}}`,
	} {
		event := "push"
		if strings.HasPrefix(name, "pr") {
			event = "pull_request"
		}
		if ev, err := parse(event, body); err == nil {
			t.Errorf("%s: decoded to %+v, want an error", name, ev)
		}
	}
	// No event header.
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256="+sign(secret, []byte(githubPush)))
	if _, err := vcshost.ParseWebhook(h, []byte(githubPush), secret); err == nil || !strings.Contains(err.Error(), "names no event") {
		t.Fatalf("no event header: %v", err)
	}
}
