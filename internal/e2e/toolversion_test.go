package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// releaseMirror serves release zips over HTTPS on 127.0.0.1, as a site's
// own mirror of releases.hashicorp.com would, and counts the downloads
// of each.
type releaseMirror struct {
	*httptest.Server
	caFile string
	mu     sync.Mutex
	zips   map[string][]byte
	hits   map[string]int
}

func newReleaseMirror(t *testing.T) *releaseMirror {
	m := &releaseMirror{zips: map[string][]byte{}, hits: map[string]int{}}
	m.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		body, ok := m.zips[r.URL.Path]
		m.hits[r.URL.Path]++
		m.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		// Slow enough that runs starting together overlap.
		time.Sleep(200 * time.Millisecond)
		w.Header().Set("Content-Type", "application/zip")
		_, _ = w.Write(body)
	}))
	t.Cleanup(m.Close)
	// The server trusts the mirror's certificate through
	// --engines-ca-file, as an operator's private CA.
	m.caFile = filepath.Join(t.TempDir(), "mirror-ca.pem")
	if err := os.WriteFile(m.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *releaseMirror) put(path string, body []byte) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.zips[path] = body
	return m.URL + path
}

func (m *releaseMirror) count(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits[path]
}

// releaseZip is a release zip as HashiCorp publishes them: the binary
// and its licence at the top. extra entries come first.
func releaseZip(t *testing.T, bin []byte, extra ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, body []byte, mode os.FileMode) {
		h := &zip.FileHeader{Name: name, Method: zip.Deflate}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range extra {
		add(name, []byte("#!/bin/sh\necho pwned\n"), 0o755)
	}
	add("LICENSE.txt", []byte("licence"), 0o644)
	add("terraform", bin, 0o755)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestRegisteredTerraformVersionRuns: a site admin registers terraform
// versions that no runner has installed, with the URL of a zip (of the
// real terraform on PATH) on an HTTPS mirror and its SHA-256. A run of a
// workspace on one downloads it, checks it, installs it into the engines
// folder and applies with it; two runs asking for a version at once
// download it once; a later run finds it installed. A registration whose
// checksum is wrong, or whose zip has an entry outside its folder, fails
// its run with a log that says why and installs nothing.
func TestRegisteredTerraformVersionRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	onPath := engines(t)[0]
	bin, err := os.ReadFile(onPath.Path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Logf("on %s/%s the registrations name this platform in archs", runtime.GOOS, runtime.GOARCH)
	}
	good := releaseZip(t, bin)
	evil := releaseZip(t, bin, "../evil")
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			m := newReleaseMirror(t)
			enginesDir := t.TempDir()
			e := testenv.New(t, testenv.Options{Store: st, EnginesDir: enginesDir, RunnerConcurrency: 2,
				Configure: func(c *server.Config) { c.EnginesCAFile = m.caFile }})
			testRegisteredTerraformVersionRuns(t, e, m, enginesDir, onPath.Version, bin, good, evil)
		})
	}
}

// onPath is the version of the terraform on PATH, which the zips hold.
func testRegisteredTerraformVersionRuns(t *testing.T, e *testenv.Env, m *releaseMirror, enginesDir, onPath string, bin, good, evil []byte) {
	ctx := context.Background()
	c := e.Client
	testenv.NewOrg(t, c, "acme")
	register := func(version, path string, zip []byte, sha string) {
		t.Helper()
		url := m.put(path, zip)
		_, err := c.Admin.TerraformVersions.Create(ctx, tfe.AdminTerraformVersionCreateOptions{Version: tfe.String(version),
			Archs: []*tfe.ToolVersionArchitecture{{URL: url, Sha: sha, OS: runtime.GOOS, Arch: runtime.GOARCH}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	start := func(name, version string) *tfe.Run {
		t.Helper()
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name), TerraformVersion: tfe.String(version), AutoApply: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		cv := uploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "a" { input = "`+name+`" }`)
		return createRun(ctx, t, c, ws.ID, cv.ID, nil)
	}
	planLog := func(r *tfe.Run) string {
		t.Helper()
		rd, err := c.Plans.Logs(ctx, r.Plan.ID)
		return readAll(t, rd, err)
	}
	installed := func(version string) bool {
		_, err := os.Stat(filepath.Join(enginesDir, "terraform", version, "terraform"))
		return err == nil
	}

	// Registered, not installed: downloaded, checked, installed, run.
	register("1.0.98", "/1.0.98.zip", good, sha256hex(good))
	first := waitRun(ctx, t, c, start("first", "1.0.98").ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	log := planLog(first)
	if first.Status != tfe.RunApplied {
		t.Fatalf("the run on a registered version ended %s:\n%s", first.Status, log)
	}
	if !strings.Contains(log, "Installed terraform 1.0.98 for "+runtime.GOOS+"_"+runtime.GOARCH+" from "+m.URL+"/1.0.98.zip (SHA-256 "+sha256hex(good)+" checked)") {
		t.Fatalf("the plan's log does not say the version was installed:\n%s", log)
	}
	if got, err := os.ReadFile(filepath.Join(enginesDir, "terraform", "1.0.98", "terraform")); err != nil || !bytes.Equal(got, bin) {
		t.Fatalf("terraform 1.0.98 is not in the engines folder as the zip held it (%v)", err)
	}
	// A later run finds it installed.
	second := waitRun(ctx, t, c, start("second", "1.0.98").ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	if log := planLog(second); second.Status != tfe.RunApplied || strings.Contains(log, "Installed terraform") {
		t.Fatalf("the second run on 1.0.98 (%s) installed it again or failed:\n%s", second.Status, log)
	}
	if n := m.count("/1.0.98.zip"); n != 1 {
		t.Fatalf("1.0.98 was downloaded %d times, want once", n)
	}

	// Two runs asking for a version at once: one download.
	register("1.0.97", "/1.0.97.zip", good, sha256hex(good))
	a, b := start("together-a", "1.0.97"), start("together-b", "1.0.97")
	for _, r := range []*tfe.Run{a, b} {
		if r = waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
			t.Fatalf("a run on 1.0.97 ended %s:\n%s", r.Status, planLog(r))
		}
	}
	if n := m.count("/1.0.97.zip"); n != 1 {
		t.Fatalf("two runs at once downloaded 1.0.97 %d times, want once", n)
	}

	// A wrong checksum: the run fails saying so, nothing is installed.
	register("1.0.96", "/1.0.96.zip", good, strings.Repeat("0", 64))
	bad := waitRun(ctx, t, c, start("bad-sha", "1.0.96").ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	log = planLog(bad)
	if bad.Status != tfe.RunErrored || !strings.Contains(log, "its SHA-256 is "+sha256hex(good)+", but the version is registered with "+strings.Repeat("0", 64)) ||
		!strings.Contains(log, "nothing was installed") {
		t.Fatalf("a run on a version registered with the wrong checksum ended %s:\n%s", bad.Status, log)
	}
	if installed("1.0.96") {
		t.Fatal("a zip whose checksum is wrong was installed")
	}

	// A zip with an entry outside its folder: refused as a whole.
	register("1.0.95", "/1.0.95.zip", evil, sha256hex(evil))
	refused := waitRun(ctx, t, c, start("evil", "1.0.95").ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	log = planLog(refused)
	if refused.Status != tfe.RunErrored || !strings.Contains(log, `the zip holds an entry "../evil" outside its own folder`) {
		t.Fatalf("a run on a zip with a ../ entry ended %s:\n%s", refused.Status, log)
	}
	if installed("1.0.95") {
		t.Fatal("a zip with a ../ entry was installed")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(enginesDir), "evil")); err == nil {
		t.Fatal("the zip's ../evil was written beside the engines folder")
	}

	// A version constraint: the newest registered version it allows
	// (1.0.95 and 1.0.96 are registered too, and older), downloaded and
	// run; the log says why that version.
	register("1.0.99", "/1.0.99.zip", good, sha256hex(good))
	constrained := waitRun(ctx, t, c, start("constrained", "~> 1.0.97").ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	log = planLog(constrained)
	if constrained.Status != tfe.RunApplied || !strings.Contains(log, `The workspace's version constraint "~> 1.0.97"`) ||
		!strings.Contains(log, "Installed terraform 1.0.99 for ") {
		t.Fatalf("a run on the constraint ~> 1.0.97 ended %s:\n%s", constrained.Status, log)
	}

	// "latest": the terraform on PATH while every registration is older;
	// the run records the version it planned with, and its apply (a
	// second job, after a newer version was registered) keeps to it.
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("pinned")})
	if err != nil {
		t.Fatal(err)
	}
	cv := uploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "a" { input = "pinned" }`)
	pinned, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
	if err != nil {
		t.Fatal(err)
	}
	pinned = waitRun(ctx, t, c, pinned.ID, 3*time.Minute, tfe.RunPlanned, tfe.RunErrored)
	if log := planLog(pinned); pinned.Status != tfe.RunPlanned || pinned.TerraformVersion != onPath || strings.Contains(log, "Installed terraform") {
		t.Fatalf("a latest run with only older versions registered ended %s with version %q (want %s, the terraform on PATH):\n%s", pinned.Status, pinned.TerraformVersion, onPath, log)
	}
	// A newer registration: latest downloads it, runs it and records it.
	register("1.99.0", "/1.99.0.zip", good, sha256hex(good))
	newest := waitRun(ctx, t, c, start("newest", "latest").ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	log = planLog(newest)
	if newest.Status != tfe.RunApplied || newest.TerraformVersion != "1.99.0" ||
		!strings.Contains(log, "The workspace's version is latest: terraform 1.99.0, the newest version registered on this site") ||
		!strings.Contains(log, "Installed terraform 1.99.0 for ") {
		t.Fatalf("a latest run with 1.99.0 registered ended %s with version %q:\n%s", newest.Status, newest.TerraformVersion, log)
	}
	if err := c.Runs.Apply(ctx, pinned.ID, tfe.RunApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	pinned = waitRun(ctx, t, c, pinned.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
	rd, err := c.Applies.Logs(ctx, pinned.Apply.ID)
	if log := readAll(t, rd, err); pinned.Status != tfe.RunApplied || pinned.TerraformVersion != onPath || strings.Contains(log, "1.99.0") {
		t.Fatalf("the apply of a run planned with %s, after 1.99.0 was registered, ended %s with version %q:\n%s", onPath, pinned.Status, pinned.TerraformVersion, log)
	}

	// Nothing else is left in the engines folder: no zip, no temporary
	// folder, no version that was refused.
	var left []string
	entries, err := os.ReadDir(enginesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		left = append(left, en.Name())
	}
	versions, err := os.ReadDir(filepath.Join(enginesDir, "terraform"))
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range versions {
		left = append(left, "terraform/"+en.Name())
	}
	if got := strings.Join(left, " "); got != "terraform terraform/1.0.97 terraform/1.0.98 terraform/1.0.99 terraform/1.99.0" {
		t.Fatalf("the engines folder holds %s, want the four versions installed and nothing else", got)
	}
}
