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
func VersityGW() (string, error) {
	if p := os.Getenv("TERRACE_TEST_VERSITYGW"); p != "" {
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	f, err := os.Open(filepath.Join(root, "tools", "versitygw", "version"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " "); ok && name == "versitygw" {
			return filepath.Join(root, ".cache", "versitygw", strings.TrimSpace(v), "versitygw"), nil
		}
	}
	return "", fmt.Errorf("tools/versitygw/version names no versitygw version")
}

// StartS3 starts versitygw on a fresh folder for the test and stops it when
// the test ends. Without the binary the test fails when CI is set (CI
// builds it with `make versitygw`) and is skipped elsewhere, with a
// message saying how to build it.
func StartS3(t testing.TB) *S3 {
	t.Helper()
	bin, err := VersityGW()
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		msg := fmt.Sprintf("versitygw, the S3-compatible server the S3 tests run against, is not built (%v): run `make versitygw` (tools/versitygw/build.sh) to build it from the Go module proxy", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := &S3{Bucket: "terrace", Access: "terrace-" + core.RandomString(6), Secret: core.RandomString(24), Dir: t.TempDir()}
	if err := os.Mkdir(filepath.Join(s.Dir, s.Bucket), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s.Endpoint = "http://" + addr
	logPath := filepath.Join(t.TempDir(), "versitygw.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--port", addr, "--access", s.Access, "--secret", s.Secret, "--quiet", "posix", s.Dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting versitygw: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		logf.Close()
	})
	// Wait until it accepts connections (or exits): a readiness wait, not
	// a timing assertion.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return s
		}
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			t.Fatalf("versitygw exited before serving (%v):\n%s", err, out)
		default:
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logPath)
			t.Fatalf("versitygw did not listen on %s within 30s:\n%s", addr, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
