package vcshost_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/vcshost"
)

// TestArchiveSubmodules: with submodules, a commit's archive holds each
// submodule's files at the commit its gitlink records (an older one, not
// the submodule's head), recursively, relative URLs resolved against the
// repository's; the token goes to the host's own address only, so a
// submodule on another server is asked without it (and the archive
// fails, saying which); a file:// submodule is not fetched. Real git and
// Gitea.
func TestArchiveSubmodules(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ca := testenv.NewCA(t)
	g := testenv.StartGiteaCA(t, ca)
	h, err := vcshost.New(vcshost.Host{Kind: vcshost.Gitea, HTTPURL: g.URL, Token: g.Token, CA: g.CA})
	if err != nil {
		t.Fatal(err)
	}
	inner := g.CreateRepo(t, "inner")
	innerSHA := g.Push(t, inner, "main", map[string]string{"inner.tf": "# inner\n"}, "inner")
	lib := g.CreateRepo(t, "lib")
	libOld := g.PushGitlinks(t, lib, map[string]string{"lib.tf": "# lib v1\n"},
		"[submodule \"deep\"]\n\tpath = deep\n\turl = ../inner.git\n", map[string]string{"deep": innerSHA})
	g.Push(t, lib, "main", map[string]string{"lib.tf": "# lib v2\n"}, "lib moves on")
	app := g.CreateRepo(t, "app")
	gitmodules := "[submodule \"lib\"]\n\tpath = modules/lib\n\turl = ../lib.git\n"
	appSHA := g.PushGitlinks(t, app, map[string]string{"main.tf": "# app\n"}, gitmodules, map[string]string{"modules/lib": libOld})

	data, err := h.ArchiveWithSubmodules(ctx, app, appSHA, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"main.tf": "# app\n", ".gitmodules": gitmodules, "modules/lib/lib.tf": "# lib v1\n",
		"modules/lib/.gitmodules": "[submodule \"deep\"]\n\tpath = deep\n\turl = ../inner.git\n", "modules/lib/deep/inner.tf": "# inner\n"}
	if got := testenv.Untar(t, data); !reflect.DeepEqual(got, want) {
		t.Fatalf("archive with submodules = %v, want %v", got, want)
	}
	// Without submodules, the gitlink is an empty folder at most.
	data, err = h.Archive(ctx, app, appSHA, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := testenv.Untar(t, data); got["modules/lib/lib.tf"] != "" {
		t.Fatalf("the archive without submodules holds the submodule's files: %v", got)
	}
	if _, err := h.ArchiveWithSubmodules(ctx, app, appSHA, 200); err == nil || !strings.Contains(err.Error(), "over 200 bytes") {
		t.Fatalf("an archive with submodules over the limit: %v", err)
	}

	// A submodule on another server: asked without the token.
	var mu sync.Mutex
	var auths []string
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		http.NotFound(w, r)
	}))
	other.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t)}}
	other.StartTLS()
	defer other.Close()
	evil := g.CreateRepo(t, "evil")
	evilSHA := g.PushGitlinks(t, evil, map[string]string{"main.tf": "# evil\n"},
		"[submodule \"x\"]\n\tpath = x\n\turl = "+other.URL+"/steal.git\n", map[string]string{"x": innerSHA})
	_, err = h.ArchiveWithSubmodules(ctx, evil, evilSHA, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "submodules") {
		t.Fatalf("a submodule on another server that refuses it: %v, want an error about the submodules", err)
	}
	mu.Lock()
	if len(auths) == 0 {
		t.Fatal("git never asked the other server for its submodule")
	}
	for _, a := range auths {
		if a != "" {
			t.Fatalf("the other server got an Authorization header: %q", a)
		}
	}
	mu.Unlock()
	if strings.Contains(err.Error(), g.Token) {
		t.Fatalf("the error shows the token: %v", err)
	}

	// A file:// submodule (a repository on the server's own disk) is not
	// fetched.
	secretDir, work := t.TempDir()+"/secret.git", t.TempDir()
	env := g.GitEnv(t)
	run := func(dir string, args ...string) string { t.Helper(); return testenv.Git(t, env, dir, args...) }
	run(work, "init", "-q", "--bare", secretDir)
	run(work, "init", "-q", "-b", "main")
	if err := os.WriteFile(work+"/secret.txt", []byte("server secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(work, "add", "secret.txt")
	run(work, "commit", "-q", "-m", "secret")
	run(work, "push", "-q", secretDir, "HEAD:refs/heads/main")
	secretSHA := run(work, "rev-parse", "HEAD")
	local := g.CreateRepo(t, "local")
	localSHA := g.PushGitlinks(t, local, map[string]string{"main.tf": "# local\n"},
		"[submodule \"s\"]\n\tpath = s\n\turl = file://"+secretDir+"\n", map[string]string{"s": secretSHA})
	data, err = h.ArchiveWithSubmodules(ctx, local, localSHA, 1<<20)
	if err == nil {
		t.Fatalf("a file:// submodule was fetched: %v", testenv.Untar(t, data))
	}
	if !strings.Contains(err.Error(), "submodules") {
		t.Fatalf("a file:// submodule: %v, want an error about the submodules", err)
	}
}
