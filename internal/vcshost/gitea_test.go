package vcshost_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/vcshost"
)

// delivery is one webhook delivery a receiver took.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver serves HTTPS on 127.0.0.1 with a certificate from ca (a real
// listener and TLS, as Terrace's would be) and hands over what is posted
// to it.
func receiver(t *testing.T, ca *testenv.CA) (string, <-chan delivery) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan delivery, 16)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			got <- delivery{r.Header.Clone(), body}
			w.WriteHeader(http.StatusNoContent)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{ca.Issue(t)}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().String() + "/webhooks/vcs", got
}

// next is the next delivery of event kind (others are skipped).
func next(t *testing.T, got <-chan delivery, kind string) delivery {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case d := <-got:
			if d.header.Get("X-Gitea-Event") == kind {
				return d
			}
		case <-deadline:
			t.Fatalf("no %s webhook delivery within 60s", kind)
		}
	}
}

// TestGitea runs every call against a real Gitea: branch heads, the
// webhook (installed, delivered over TLS to a receiver Gitea trusts,
// verified, removed), statuses, and archives fetched by git.
func TestGitea(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ca := testenv.NewCA(t)
	g := testenv.StartGitea(t, ca.PEM)
	h, err := vcshost.New(vcshost.Host{Kind: vcshost.Gitea, HTTPURL: g.URL, Token: g.Token, CA: g.CA})
	if err != nil {
		t.Fatal(err)
	}
	repo := g.CreateRepo(t, "infra")
	first := map[string]string{"main.tf": "# one\n", "old.tf": "# old\n", "modules/net/net.tf": "# net\n"}
	sha1 := g.Push(t, repo, "main", first, "first commit")

	c, err := h.Branch(ctx, repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	if c.SHA != sha1 || strings.TrimSpace(c.Message) != "first commit" || c.Author != "Terrace Test" || !strings.Contains(c.URL, sha1) {
		t.Fatalf("Branch = %+v, want %s by Terrace Test", c, sha1)
	}
	if b, err := h.DefaultBranch(ctx, repo); err != nil || b != "main" {
		t.Fatalf("DefaultBranch = %q, %v", b, err)
	}
	_, err = h.Branch(ctx, repo, "nope")
	if !errors.Is(err, vcshost.ErrNotFound) || !strings.Contains(err.Error(), "branch nope not found in "+repo) {
		t.Fatalf("Branch of a missing branch: %v", err)
	}
	_, err = h.Branch(ctx, g.Admin+"/missing", "main")
	if !errors.Is(err, vcshost.ErrNotFound) || !strings.Contains(err.Error(), "repository "+g.Admin+"/missing not found or the token cannot read it") {
		t.Fatalf("Branch of a missing repository: %v", err)
	}

	// The webhook: a push after CreateHook is delivered, signed.
	hookURL, got := receiver(t, ca)
	secret := "s3cret-" + t.Name()
	id, err := h.CreateHook(ctx, repo, hookURL, secret)
	if err != nil {
		t.Fatal(err)
	}
	second := map[string]string{"main.tf": "# two\n", "new.tf": "# new\n", "modules/net/net.tf": "# net\n"}
	sha2 := g.Push(t, repo, "main", second, "second commit")
	d := next(t, got, "push")
	ev, err := vcshost.ParseWebhook(d.header, d.body, secret)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"main.tf", "new.tf", "old.tf"}
	if ev.Kind != "push" || ev.Repo != repo || ev.Branch != "main" || ev.SHA != sha2 || ev.Before != sha1 ||
		ev.Sender != g.Admin || ev.Deleted || ev.Truncated || !reflect.DeepEqual(ev.Changed, want) || ev.Delivery == "" {
		t.Fatalf("push event = %+v, want main %s after %s changing %v", ev, sha2, sha1, want)
	}
	if ev.HeadCommit == nil || ev.HeadCommit.SHA != sha2 || strings.TrimSpace(ev.HeadCommit.Message) != "second commit" {
		t.Fatalf("push event's head commit = %+v", ev.HeadCommit)
	}
	if _, err := vcshost.ParseWebhook(d.header, d.body, secret+"x"); !errors.Is(err, vcshost.ErrBadSignature) {
		t.Fatalf("ParseWebhook with a wrong secret: %v, want ErrBadSignature", err)
	}

	// A pull request from a branch off main.
	g.Push(t, repo, "feature", map[string]string{"main.tf": "# feature\n"}, "feature commit")
	feature, err := h.Branch(ctx, repo, "feature")
	if err != nil {
		t.Fatal(err)
	}
	g.Must(t, "POST", "/repos/"+repo+"/pulls", map[string]any{"head": "feature", "base": "main", "title": "Try it"})
	d = next(t, got, "pull_request")
	ev, err = vcshost.ParseWebhook(d.header, d.body, secret)
	if err != nil {
		t.Fatal(err)
	}
	if pr := ev.PR; ev.Kind != "pull_request" || ev.Repo != repo || ev.SHA != feature.SHA || pr == nil || pr.Action != "opened" ||
		pr.Number != 1 || pr.Title != "Try it" || pr.Head != "feature" || pr.HeadSHA != feature.SHA || pr.HeadRepo != repo ||
		pr.Base != "main" || pr.Merged {
		t.Fatalf("pull request event = %+v, PR %+v", ev, ev.PR)
	}

	// Statuses: the last of a context is what Gitea shows.
	for _, st := range []string{"pending", "success"} {
		err := h.SetStatus(ctx, repo, sha2, vcshost.Status{State: st, Context: "terrace/app", Description: "Run " + st, TargetURL: "https://terrace.example/runs/run-1"})
		if err != nil {
			t.Fatal(err)
		}
	}
	var statuses []map[string]any
	if status := g.Do(t, "GET", "/repos/"+repo+"/commits/"+sha2+"/statuses", nil, &statuses); status != http.StatusOK || len(statuses) != 2 {
		t.Fatalf("statuses of %s: %d %v", sha2, status, statuses)
	}
	// Both were made within a second: the newest has the higher ID.
	newest := slices.MaxFunc(statuses, func(a, b map[string]any) int { return int(a["id"].(float64) - b["id"].(float64)) })
	if s := newest; s["status"] != "success" || s["context"] != "terrace/app" || s["description"] != "Run success" || s["target_url"] != "https://terrace.example/runs/run-1" {
		t.Fatalf("the newest status = %v", s)
	}
	if err := h.SetStatus(ctx, repo, sha2, vcshost.Status{State: "done", Context: "x"}); err == nil {
		t.Fatal("SetStatus took the state done")
	}

	// Archives: each commit's tree exactly, the older one too (no longer
	// a branch's head).
	for sha, files := range map[string]map[string]string{sha1: first, sha2: second} {
		data, err := h.Archive(ctx, repo, sha, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if got := testenv.Untar(t, data); !reflect.DeepEqual(got, files) {
			t.Fatalf("archive of %s = %v, want %v", sha, got, files)
		}
	}
	// One folder of a commit (a monorepo's module): its files at the root.
	data, err := h.ArchiveDir(ctx, repo, sha1, "modules/net/", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := testenv.Untar(t, data); !reflect.DeepEqual(got, map[string]string{"net.tf": "# net\n"}) {
		t.Fatalf("archive of modules/net = %v", got)
	}
	for _, dir := range []string{"../etc", "modules/../..", "-x", "a\\b"} {
		if _, err := h.ArchiveDir(ctx, repo, sha1, dir, 1<<20); err == nil || !strings.Contains(err.Error(), "not a folder of the repository") {
			t.Fatalf("ArchiveDir %q: %v, want it refused", dir, err)
		}
	}
	if _, err := h.ArchiveDir(ctx, repo, sha1, "missing", 1<<20); err == nil {
		t.Fatal("ArchiveDir of a missing folder succeeded")
	}

	// Tags and the branch's commits, newest first.
	g.PushTag(t, repo, "v1.0.0", sha1)
	tags, err := h.Tags(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tags, []vcshost.Tag{{Name: "v1.0.0", SHA: sha1}}) {
		t.Fatalf("Tags = %+v, want v1.0.0 at %s", tags, sha1)
	}
	log, err := h.Commits(ctx, repo, "main", 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].SHA != sha2 || log[1].SHA != sha1 || strings.TrimSpace(log[0].Message) != "second commit" ||
		!strings.Contains(log[0].URL, sha2) || log[0].Date == "" {
		t.Fatalf("Commits = %+v, want the second and the first commit", log)
	}
	if _, err := h.Tags(ctx, "terrace/missing"); !errors.Is(err, vcshost.ErrNotFound) {
		t.Fatalf("Tags of a missing repository: %v", err)
	}
	if _, err := h.Archive(ctx, repo, sha2, 64); err == nil || !strings.Contains(err.Error(), "over 64 bytes") {
		t.Fatalf("Archive over the limit: %v", err)
	}
	wrong := "0123456789abcdef0123456789abcdef01234567"
	_, err = vcshost.Archive(ctx, h.CloneURL(repo), wrong, sha2, g.CA, 1<<20)
	if !errors.Is(err, vcshost.ErrUnauthorized) || strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), g.Token) {
		t.Fatalf("Archive with a wrong token: %v", err)
	}
	t.Logf("Archive with a wrong token: %v", err)
	if _, err := vcshost.Archive(ctx, h.CloneURL(repo), g.Token, sha2, nil, 1<<20); err == nil {
		t.Fatal("Archive trusted Gitea's certificate without its CA")
	}

	// HooksTo: the hooks delivering to a URL, and only those.
	other, err := h.CreateHook(ctx, repo, hookURL+"/other", secret)
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := h.HooksTo(ctx, repo, hookURL); err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("HooksTo = %v, %v, want [%s]", ids, err, id)
	}
	if err := h.DeleteHook(ctx, repo, other); err != nil {
		t.Fatal(err)
	}
	if _, err := h.HooksTo(ctx, "acme/missing", hookURL); !errors.Is(err, vcshost.ErrNotFound) {
		t.Fatalf("HooksTo of a missing repository: %v, want not found", err)
	}

	// DeleteHook: the hook is gone, and deleting it again is no error.
	if err := h.DeleteHook(ctx, repo, id); err != nil {
		t.Fatal(err)
	}
	var hooks []map[string]any
	if status := g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks); status != http.StatusOK || len(hooks) != 0 {
		t.Fatalf("hooks after DeleteHook: %d %v", status, hooks)
	}
	if err := h.DeleteHook(ctx, repo, id); err != nil {
		t.Fatalf("DeleteHook of a deleted hook: %v", err)
	}
}
