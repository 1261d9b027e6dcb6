package testenv

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// S3 is a real S3-compatible server for tests: versitygw (built by
// tools/versitygw/build.sh, `make versitygw`) serving a folder of its own,
// with one empty bucket.
type S3 struct {
	// Endpoint is http://127.0.0.1:<port>.
	Endpoint string
	Bucket   string
	// Access and Secret are the root credentials (AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY for the clients).
	Access, Secret string
	// Dir is the folder versitygw serves (the bucket is Dir/Bucket).
	Dir string
}

// Spec is the --blobs value that opens the bucket.
func (s *S3) Spec() string {
	return "s3://" + s.Bucket + "?endpoint=" + s.Endpoint + "&region=us-east-1&use_path_style=true&disable_https=true"
}

// Env is the environment a terrace server process needs to reach the
// bucket.
func (s *S3) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.Access, "AWS_SECRET_ACCESS_KEY=" + s.Secret, "AWS_REGION=us-east-1"}
}

// SetEnv sets the credentials in this test process's environment (so the
// test cannot run in parallel with others).
func (s *S3) SetEnv(t testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// VersityGW returns the versitygw binary the tests use:
// TERRACE_TEST_VERSITYGW, else the one tools/versitygw/build.sh puts under
// the repository's .cache.
func VersityGW() (string, error) { return cachedTool("TERRACE_TEST_VERSITYGW", "versitygw") }

// cachedTool is a server binary a test starts: the one env names, else
// .cache/<name>/<version>/<name>, where tools/<name>/build.sh builds the
// version its tools/<name>/version file names (a line "<name> <version>").
func cachedTool(env, name string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	f, err := os.Open(filepath.Join(root, "tools", name, "version"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " "); ok && n == name {
			return filepath.Join(root, ".cache", name, strings.TrimSpace(v), name), nil
		}
	}
	return "", fmt.Errorf("tools/%s/version names no %s version", name, name)
}

// needTool returns the binary cachedTool finds, or ends the test: it
// fails when CI is set (CI builds it with `make <name>`) and is skipped
// elsewhere, with a message saying how to build it (what: what it is).
func needTool(t testing.TB, env, name, what string) string {
	t.Helper()
	bin, err := cachedTool(env, name)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		msg := fmt.Sprintf("%s, %s, is not built (%v): run `make %s` (tools/%s/build.sh) to build it from the Go module proxy", name, what, err, name, name)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// freeAddr is a 127.0.0.1 address with a port free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer starts cmd (its output to a log file of the test's), stops
// it when the test ends, and waits until it accepts connections at addr,
// failing the test with its log if it exits first or takes over 30 s.
// The readiness wait is not a timing assertion.
func startServer(t testing.TB, name string, cmd *exec.Cmd, addr string) (logPath string) {
	t.Helper()
	logPath = filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return logPath
		}
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			t.Fatalf("%s exited before serving (%v):\n%s", name, err, out)
		default:
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logPath)
			t.Fatalf("%s did not listen on %s within 30s:\n%s", name, addr, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StartS3 starts versitygw on a fresh folder for the test and stops it when
// the test ends. Without the binary the test fails when CI is set (CI
// builds it with `make versitygw`) and is skipped elsewhere, with a
// message saying how to build it.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	bin := needTool(t, "TERRACE_TEST_VERSITYGW", "versitygw", "the S3-compatible server the S3 tests run against")
	s := &S3{Bucket: "terrace", Access: "terrace-" + core.RandomString(6), Secret: core.RandomString(24), Dir: t.TempDir()}
	if err := os.Mkdir(filepath.Join(s.Dir, s.Bucket), 0o700); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	s.Endpoint = "http://" + addr
	startServer(t, "versitygw", exec.Command(bin, "--port", addr, "--access", s.Access, "--secret", s.Secret, "--quiet", "posix", s.Dir), addr)
	return s
}
