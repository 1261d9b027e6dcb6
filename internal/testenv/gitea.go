package testenv

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	tfe "github.com/hashicorp/go-tfe"
	"github.com/terracehq/terrace/internal/server"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// Gitea is a real git server for tests: Gitea (built by tools/gitea/build.sh,
// `make gitea`) with a SQLite database, everything in a folder of the
// test's, serving HTTPS with a CA of its own on 127.0.0.1, with one admin
// user and an API token of every scope.
type Gitea struct {
	// URL is https://127.0.0.1:<port>, without a trailing slash.
	URL string
	// CA is the PEM certificate Gitea's TLS certificate chains to.
	CA []byte
	// HTTP trusts CA.
	HTTP *http.Client
	// Admin is the admin user's name; Token is an API token of theirs
	// with every scope (also their git password over HTTPS).
	Admin, Token string
	// LogPath is the server's output.
	LogPath string
	// Bin is the gitea binary; Config its app.ini, for its CLI.
	Bin, Config string
	// Dir holds the database, the repositories and the configuration.
	Dir    string
	caFile string
}

var tokenRE = regexp.MustCompile(`^[0-9a-f]+$`)

// StartGitea starts Gitea for the test and stops it when the test ends.
// Gitea trusts the PEM CA certificates in trust (and its own) for the
// HTTPS it calls, webhook deliveries among them: give it the CA of the
// receiver (a Terrace test server's is in the file Env.CAFile names, a
// test's own from NewCA). Webhooks may go to loopback addresses. Without
// the binary the test fails when CI is set (CI builds it with `make
// gitea`) and is skipped elsewhere, with a message saying how to build it.
func StartGitea(t testing.TB, trust ...[]byte) *Gitea {
	t.Helper()
	return StartGiteaCA(t, NewCA(t), trust...)
}

// StartGiteaCA is StartGitea with Gitea's certificate issued by ca: for a
// test that must give its CA to a server started before Gitea (Terrace's
// VCSCAFile).
func StartGiteaCA(t testing.TB, ca *CA, trust ...[]byte) *Gitea {
	t.Helper()
	bin := needTool(t, "TERRACE_TEST_GITEA", "gitea", "the git server the VCS-driven workspace tests push to")
	addr, dir := freeAddr(t), t.TempDir()
	_, port, _ := net.SplitHostPort(addr)
	g := &Gitea{URL: "https://" + addr, Admin: "terrace", Bin: bin, Dir: dir, Config: filepath.Join(dir, "app.ini")}
	g.CA = ca.PEM
	certPEM, keyPEM := ca.IssuePEM(t)
	g.caFile = filepath.Join(dir, "ca.pem")
	bundle := append(bytes.Clone(ca.PEM), bytes.Join(trust, []byte("\n"))...)
	for name, data := range map[string][]byte{"ca.pem": ca.PEM, "cert.pem": certPEM, "key.pem": keyPEM, "trust.pem": bundle} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Without the bindata tag Gitea reads options/ and templates/ from its
	// static root: the folder build.sh puts them in, beside the binary.
	ini := fmt.Sprintf(giteaINI, dir, filepath.Dir(bin), port, core.RandomString(32), core.RandomString(43), core.RandomString(43))
	if err := os.WriteFile(g.Config, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	env := giteaEnv(dir, "SSL_CERT_FILE="+filepath.Join(dir, "trust.pem"))
	cmd := exec.Command(bin, "web", "--config", g.Config, "--work-path", dir)
	cmd.Env = env
	g.LogPath = startServer(t, "gitea", cmd, addr)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(g.LogPath)
			t.Logf("gitea's log (%s), its end:\n%s", g.LogPath, out[max(0, len(out)-16<<10):])
		}
	})
	g.HTTP = httpClient(t, g.caFile)
	// Listening is not yet migrated and serving: wait for its health.
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := g.HTTP.Get(g.URL + "/api/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(g.LogPath)
			t.Fatalf("gitea at %s was not healthy within 60s (%v):\n%s", g.URL, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The admin signs in with nothing but the token: its password is
	// random and not kept.
	g.cli(t, env, "admin", "user", "create", "--username", g.Admin, "--email", g.Admin+"@example.test",
		"--random-password", "--admin", "--must-change-password=false")
	// Run as root, the CLI logs warnings to standard output too (before
	// the token, and on a slow machine after it): the token is the word of
	// 40 hexadecimal digits.
	printed := g.cli(t, env, "admin", "user", "generate-access-token", "--username", g.Admin,
		"--token-name", "terrace-test", "--scopes", "all", "--raw")
	for _, w := range strings.Fields(printed) {
		if len(w) == 40 && tokenRE.MatchString(w) {
			g.Token = w
		}
	}
	if g.Token == "" {
		t.Fatalf("gitea admin user generate-access-token printed no token: %q", printed)
	}
	// The CLI wrote the token into the database the server reads; on a
	// loaded machine the server may answer before it sees it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status, out := g.Call(t, "GET", "/user", nil)
		if status == http.StatusOK && out["login"] == g.Admin {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gitea: the admin's token does not work: %d %v", status, out)
		}
	}
	return g
}

// giteaINI is the configuration: %[1]s the work folder, %[2]s the static
// root, %[3]s the port, then three secrets. Gitea refuses to run as root
// (CI's tests do) without I_AM_BEING_UNSAFE_RUNNING_AS_ROOT; the secrets
// are given so that neither the server nor the CLI writes app.ini; the
// channel queue delivers webhooks without a queue folder; actions, cron,
// mail and SSH are off. A refresh token works once, as GitHub's do (Gitea
// takes a used one again unless told not to).
const giteaINI = `APP_NAME = Terrace test Gitea
RUN_MODE = prod
WORK_PATH = %[1]s
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
PROTOCOL = https
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[3]s
DOMAIN = 127.0.0.1
ROOT_URL = https://127.0.0.1:%[3]s/
CERT_FILE = %[1]s/cert.pem
KEY_FILE = %[1]s/key.pem
STATIC_ROOT_PATH = %[2]s
APP_DATA_PATH = %[1]s/data
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false

[database]
DB_TYPE = sqlite3
PATH = %[1]s/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[1]s/repositories
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = %[4]s
INTERNAL_TOKEN = %[5]s

[oauth2]
JWT_SECRET = %[6]s
INVALIDATE_REFRESH_TOKENS = true

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = true

[webhook]
ALLOWED_HOST_LIST = loopback
DELIVER_TIMEOUT = 10

[actions]
ENABLED = false

[mailer]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[queue]
TYPE = channel

[indexer]
ISSUE_INDEXER_TYPE = db

[cron]
ENABLED = false

[log]
MODE = console
LEVEL = Info
ROOT_PATH = %[1]s/log
`

// giteaEnv is the environment of Gitea and of its CLI: this process's
// without git, Gitea or home settings, with a home in dir, plus extra.
func giteaEnv(dir string, extra ...string) []string {
	env := envWithoutGit()
	home := filepath.Join(dir, "home")
	_ = os.MkdirAll(home, 0o700)
	return append(append(env, "HOME="+home, "GITEA_WORK_DIR="+dir), extra...)
}

// envWithoutGit is os.Environ without HOME, XDG_CONFIG_HOME and the GIT_* and
// GITEA_* variables.
func envWithoutGit() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "XDG_CONFIG_HOME" || strings.HasPrefix(k, "GIT_") || strings.HasPrefix(k, "GITEA_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// cli runs Gitea's CLI on the server's configuration and returns its
// standard output.
func (g *Gitea) cli(t testing.TB, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(g.Bin, append([]string{"--config", g.Config, "--work-path", g.Dir}, args...)...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gitea %s: %v\n%s", strings.Join(args[:3], " "), err, stderr.Bytes())
	}
	return string(out)
}

// Call makes one call to Gitea's API (path below /api/v1) as the admin,
// encoding body as JSON when not nil, and returns the status and the
// decoded answer (nil when empty; a JSON array is under the key "items").
func (g *Gitea) Call(t testing.TB, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var out any
	status := g.Do(t, method, path, body, &out)
	switch v := out.(type) {
	case map[string]any:
		return status, v
	case []any:
		return status, map[string]any{"items": v}
	}
	return status, nil
}

// Do is Call decoding the answer into out (nil: not decoded; an error's
// answer that is not JSON is not decoded either).
func (g *Gitea) Do(t testing.TB, method, path string, body, out any) int {
	t.Helper()
	status, data := callJSON(t, g.HTTP, method, g.URL+"/api/v1"+path, body, "Authorization", "token "+g.Token)
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		// An error's answer may be text (a panic's).
		if err := json.Unmarshal(data, out); err != nil && status/100 == 2 {
			t.Fatalf("gitea: %s %s: %d: %.300s", method, path, status, data)
		}
	}
	return status
}

// CommitStatus is a commit status as Gitea shows it.
type CommitStatus struct {
	State       string `json:"status"`
	Context     string `json:"context"`
	Description string `json:"description"`
	Target      string `json:"target_url"`
}

// LatestStatus is the latest status of context on commit sha of repo
// (Gitea's combined status keeps the newest of each context); ok false
// when it has none.
func (g *Gitea) LatestStatus(t testing.TB, repo, sha, context string) (st CommitStatus, ok bool) {
	t.Helper()
	var combined struct {
		Statuses []CommitStatus `json:"statuses"`
	}
	g.Do(t, "GET", "/repos/"+repo+"/commits/"+sha+"/status", nil, &combined)
	for _, s := range combined.Statuses {
		if s.Context == context {
			return s, true
		}
	}
	return CommitStatus{}, false
}

// Must is Call failing the test on any status but 2xx.
func (g *Gitea) Must(t testing.TB, method, path string, body any) map[string]any {
	t.Helper()
	status, out := g.Call(t, method, path, body)
	if status/100 != 2 {
		t.Fatalf("gitea: %s %s: %d %v", method, path, status, out)
	}
	return out
}

// CreateRepo creates an empty private repository and returns its full
// name, owner/name. A bare name is the admin's; an owner other than the
// admin is an organization, created when missing.
func (g *Gitea) CreateRepo(t testing.TB, repo string) string {
	t.Helper()
	owner, name, ok := strings.Cut(repo, "/")
	if !ok {
		owner, name = g.Admin, repo
	}
	spec := map[string]any{"name": name, "private": true, "default_branch": "main"}
	if owner == g.Admin {
		g.Must(t, "POST", "/user/repos", spec)
	} else {
		if status, _ := g.Call(t, "GET", "/orgs/"+url.PathEscape(owner), nil); status == http.StatusNotFound {
			g.Must(t, "POST", "/orgs", map[string]any{"username": owner, "visibility": "private"})
		}
		g.Must(t, "POST", "/orgs/"+url.PathEscape(owner)+"/repos", spec)
	}
	return owner + "/" + name
}

// CloneURL is repo's (owner/name) HTTPS clone URL.
func (g *Gitea) CloneURL(repo string) string { return g.URL + "/" + repo + ".git" }

// GitEnv is the environment for the real git binary to reach Gitea as
// the admin: the token goes in an Authorization header through
// GIT_CONFIG_* variables (never a command line), the CA through
// GIT_SSL_CAINFO, with an empty home, no system configuration and no
// prompts.
func (g *Gitea) GitEnv(t testing.TB) []string {
	t.Helper()
	basic := base64.StdEncoding.EncodeToString([]byte(g.Admin + ":" + g.Token))
	return append(envWithoutGit(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_SSL_CAINFO="+g.caFile,
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Basic "+basic,
		"GIT_AUTHOR_NAME=Terrace Test", "GIT_AUTHOR_EMAIL=test@example.test",
		"GIT_COMMITTER_NAME=Terrace Test", "GIT_COMMITTER_EMAIL=test@example.test")
}

// Push commits files (path → content) to branch of repo (owner/name) with
// the real git binary over HTTPS and returns the new commit's SHA. The
// commit's tree is exactly files: a file of the parent's that files does
// not name is removed. Its parent is the branch's head, or, for a new
// branch, the default branch's head (none in an empty repository). It
// returns once Gitea's API shows the branch at the commit.
func (g *Gitea) Push(t testing.TB, repo, branch string, files map[string]string, message string) string {
	t.Helper()
	env, dir := g.GitEnv(t), t.TempDir()
	git := func(args ...string) string { t.Helper(); return Git(t, env, dir, args...) }
	git("init", "-q", "-b", branch)
	git("remote", "add", "origin", g.CloneURL(repo))
	for _, ref := range []string{"refs/heads/" + branch, "HEAD"} {
		if git("ls-remote", "origin", ref) != "" {
			git("fetch", "-q", "--depth=1", "origin", ref)
			// HEAD moves to the parent; the index stays empty, so the
			// commit holds only files.
			git("reset", "-q", "--soft", "FETCH_HEAD")
			break
		}
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", "-A")
	git("commit", "-q", "--allow-empty", "-m", message)
	git("push", "-q", "origin", "HEAD:refs/heads/"+branch)
	sha := git("rev-parse", "HEAD")
	g.waitBranch(t, repo, branch, sha)
	return sha
}

// waitBranch returns once Gitea's API shows branch of repo at sha: Gitea
// takes a push in (the branch's record, a first push's repository no
// longer empty, webhooks) after git's answer.
func (g *Gitea) waitBranch(t testing.TB, repo, branch, sha string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var b struct {
			Commit struct {
				ID string `json:"id"`
			} `json:"commit"`
		}
		status := g.Do(t, "GET", "/repos/"+repo+"/branches/"+branch, nil, &b)
		if status == http.StatusOK && b.Commit.ID == sha {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gitea: branch %s of %s is not at %s within 30s (%d, at %q)", branch, repo, sha, status, b.Commit.ID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Git runs the real git binary in dir with env and returns its output,
// trimmed; a failure fails the test with git's message.
func Git(t testing.TB, env []string, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", args[0], err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}

// PushGitlinks commits to branch main of repo, over files, a .gitmodules
// and gitlinks (path → commit SHA), as `git submodule add` leaves them,
// with the real git binary, and returns the commit's SHA.
func (g *Gitea) PushGitlinks(t testing.TB, repo string, files map[string]string, gitmodules string, links map[string]string) string {
	t.Helper()
	files[".gitmodules"] = gitmodules
	sha := g.Push(t, repo, "main", files, "files")
	env, dir := g.GitEnv(t), t.TempDir()
	git := func(args ...string) string { t.Helper(); return Git(t, env, dir, args...) }
	git("init", "-q", "-b", "main")
	git("fetch", "-q", "--depth=1", g.CloneURL(repo), sha)
	git("reset", "-q", "--soft", "FETCH_HEAD")
	git("read-tree", "FETCH_HEAD")
	for path, commit := range links {
		git("update-index", "--add", "--cacheinfo", "160000,"+commit+","+path)
	}
	git("commit", "-q", "-m", "submodules")
	git("push", "-q", g.CloneURL(repo), "HEAD:refs/heads/main")
	sha = git("rev-parse", "HEAD")
	g.waitBranch(t, repo, "main", sha)
	return sha
}

// PushTag pushes tag (a lightweight tag) at commit sha of repo with the
// real git binary, as a developer tags a release, and returns once
// Gitea's API shows the tag.
func (g *Gitea) PushTag(t testing.TB, repo, tag, sha string) {
	t.Helper()
	env, dir := g.GitEnv(t), t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"fetch", "-q", "--depth=1", g.CloneURL(repo), sha},
		{"push", "-q", g.CloneURL(repo), sha + ":refs/tags/" + tag}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", args[0], err, out)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got struct {
			Commit struct {
				SHA string `json:"sha"`
			} `json:"commit"`
		}
		status := g.Do(t, "GET", "/repos/"+repo+"/tags/"+url.PathEscape(tag), nil, &got)
		if status == http.StatusOK && got.Commit.SHA == sha {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gitea: tag %s of %s is not at %s within 30s (%d, at %q)", tag, repo, sha, status, got.Commit.SHA)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CA is a certificate authority made for one test: servers get a
// certificate from it, clients trust PEM.
type CA struct {
	// PEM is the CA's certificate.
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA for the test.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "Terrace test CA " + core.RandomString(6)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert: cert, key: key}
}

// IssuePEM returns a server certificate and its key, PEM, for 127.0.0.1,
// ::1, localhost and hosts (names or IP addresses).
func (ca *CA) IssuePEM(t testing.TB, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// Issue is IssuePEM as a tls.Certificate, for a server's tls.Config.
func (ca *CA) Issue(t testing.TB, hosts ...string) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(ca.IssuePEM(t, hosts...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Pool is a certificate pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// NewWithGitea starts Terrace (opts) and a Gitea that trust each other:
// Gitea's certificate comes from a CA of the test's, which Terrace is told
// to trust (--vcs-ca-file), and Gitea trusts Terrace's for the webhooks
// it delivers.
func NewWithGitea(t testing.TB, opts Options) (*Env, *Gitea) {
	t.Helper()
	ca := NewCA(t)
	caFile := filepath.Join(t.TempDir(), "gitea-ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	configure := opts.Configure
	opts.Configure = func(c *server.Config) {
		if configure != nil {
			configure(c)
		}
		c.VCSCAFile = caFile
	}
	e := New(t, opts)
	terraceCA, err := os.ReadFile(e.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return e, StartGiteaCA(t, ca, terraceCA)
}

// Provider makes org's VCS provider for this Gitea (its API and web
// addresses, the admin's token), through go-tfe's OAuth clients API.
func (g *Gitea) Provider(t testing.TB, c *tfe.Client, org string) *tfe.OAuthClient {
	t.Helper()
	oc, err := c.OAuthClients.Create(context.Background(), org, tfe.OAuthClientCreateOptions{ServiceProvider: tfe.ServiceProvider("gitea"),
		APIURL: tfe.String(g.URL + "/api/v1"), HTTPURL: tfe.String(g.URL), OAuthToken: tfe.String(g.Token), Name: tfe.String("corp gitea")})
	if err != nil {
		t.Fatal(err)
	}
	return oc
}
