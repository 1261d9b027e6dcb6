package engine

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// zipOf makes a zip of files (name → content), in the order given.
func zipOf(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		h := &zip.FileHeader{Name: f[0], Method: zip.Deflate}
		h.SetMode(0o755)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// releaseServer serves zips over HTTPS on 127.0.0.1 (path → body) and
// counts the requests for each path.
type releaseServer struct {
	*httptest.Server
	mu    sync.Mutex
	zips  map[string][]byte
	hits  map[string]int
	delay time.Duration
}

func newReleaseServer(t *testing.T) *releaseServer {
	rs := &releaseServer{zips: map[string][]byte{}, hits: map[string]int{}}
	rs.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		body, ok := rs.zips[r.URL.Path]
		rs.hits[r.URL.Path]++
		delay := rs.delay
		rs.mu.Unlock()
		time.Sleep(delay)
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/zip")
		_, _ = w.Write(body)
	}))
	t.Cleanup(rs.Close)
	return rs
}

// put serves body at path and returns the release's build for this
// machine's platform.
func (rs *releaseServer) put(path string, body []byte) Build {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.zips[path] = body
	return Build{OS: runtime.GOOS, Arch: runtime.GOARCH, URL: rs.URL + path, SHA256: sha(body)}
}

func (rs *releaseServer) count(path string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.hits[path]
}

// entries lists what a folder holds, recursively ("" for nothing).
func entries(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, ", ")
}

// script is a stand-in engine that reports version v.
func script(v string) string {
	return "#!/bin/sh\necho '{\"terraform_version\":\"" + v + "\"}'\n"
}

// TestInstallRegisteredRelease: a version that is not installed but
// registered is downloaded over HTTPS (a zip of the real terraform on
// PATH), checked against its SHA-256, installed into the engines folder
// as the version it was registered as, and found there from then on,
// without another download, also by Find alone.
func TestInstallRegisteredRelease(t *testing.T) {
	t.Parallel()
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatal("terraform is not on PATH: this test needs it")
	}
	bin, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	rs := newReleaseServer(t)
	b := rs.put("/terraform_1.0.99.zip", zipOf(t, [2]string{"LICENSE.txt", "license"}, [2]string{"terraform", string(bin)}))
	f := &Finder{Dir: t.TempDir(), HTTP: rs.Client()}
	ctx := context.Background()
	rel := &Release{Name: "terraform", Version: "1.0.99", Builds: []Build{{OS: "linux", Arch: "s390x", URL: rs.URL + "/other.zip", SHA256: strings.Repeat("0", 64)}, b}}

	p, installed, err := f.FindOrInstall(ctx, "1.0.99", rel)
	want := filepath.Join(f.Dir, "terraform", "1.0.99", "terraform")
	if err != nil || p != want || installed == nil || installed.URL != b.URL {
		t.Fatalf("FindOrInstall: %q %+v %v, want %s installed from %s", p, installed, err, want, b.URL)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, bin) {
		t.Fatal("the installed binary is not the one in the zip")
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Fatalf("the installed binary is not executable: %v %v", st.Mode(), err)
	}
	if v, err := f.Version(ctx, p); err != nil || v == "" {
		t.Fatalf("the installed terraform does not run: %q %v", v, err)
	}
	if got := entries(t, f.Dir); got != "terraform, terraform/1.0.99, terraform/1.0.99/"+recordFile+", terraform/1.0.99/terraform" {
		t.Fatalf("the engines folder holds %s: the binary and its record only (no zip, no license, no temporary folder)", got)
	}

	// From now on: found, not downloaded again.
	p2, again, err := f.FindOrInstall(ctx, "v1.0.99", rel)
	if err != nil || p2 != want || again != nil {
		t.Fatalf("second FindOrInstall: %q %+v %v", p2, again, err)
	}
	if p3, err := f.Find(ctx, "1.0.99"); err != nil || p3 != want {
		t.Fatalf("Find without the registration: %q %v", p3, err)
	}
	if n := rs.count("/terraform_1.0.99.zip"); n != 1 {
		t.Fatalf("the zip was downloaded %d times, want once", n)
	}

	// The registration moves to another build: it replaces the first.
	b2 := rs.put("/terraform_1.0.99_fixed.zip", zipOf(t, [2]string{"terraform", script("1.0.99")}))
	p4, installed, err := f.FindOrInstall(ctx, "1.0.99", &Release{Name: "terraform", Version: "1.0.99", Builds: []Build{b2}})
	if err != nil || p4 != want || installed == nil || installed.SHA256 != b2.SHA256 {
		t.Fatalf("FindOrInstall of a new build: %q %+v %v", p4, installed, err)
	}
	if got, _ := os.ReadFile(p4); string(got) != script("1.0.99") {
		t.Fatal("the new build did not replace the first")
	}
	if got := entries(t, f.Dir); got != "terraform, terraform/1.0.99, terraform/1.0.99/"+recordFile+", terraform/1.0.99/terraform" {
		t.Fatalf("after the replacement the engines folder holds %s", got)
	}
}

// TestInstallOnceForConcurrentRuns: runs asking for the same registered
// version at once download it once.
func TestInstallOnceForConcurrentRuns(t *testing.T) {
	t.Parallel()
	rs := newReleaseServer(t)
	rs.delay = 300 * time.Millisecond
	b := rs.put("/tf.zip", zipOf(t, [2]string{"terraform", script("2.0.1")}))
	f := &Finder{Dir: t.TempDir(), HTTP: rs.Client()}
	rel := &Release{Name: "terraform", Version: "2.0.1", Builds: []Build{b}}
	var wg sync.WaitGroup
	var installs atomic.Int32
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, installed, err := f.FindOrInstall(context.Background(), "2.0.1", rel)
			if err != nil || p != filepath.Join(f.Dir, "terraform", "2.0.1", "terraform") {
				errs <- errors.Join(err, errors.New("path "+p))
			}
			if installed != nil {
				installs.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := rs.count("/tf.zip"); n != 1 {
		t.Fatalf("4 runs at once downloaded the zip %d times, want once", n)
	}
	if n := installs.Load(); n < 1 {
		t.Fatalf("no run reported the install")
	}
}

// TestInstallRefusals: a release that cannot be installed as registered
// fails with a ReleaseError that says why, and leaves the engines folder
// as it was.
func TestInstallRefusals(t *testing.T) {
	t.Parallel()
	rs := newReleaseServer(t)
	good := zipOf(t, [2]string{"terraform", script("3.0.0")})
	for _, c := range []struct {
		name  string
		build func() Build
		limit int64
		want  string
	}{
		{"wrong sha", func() Build {
			b := rs.put("/good.zip", good)
			b.SHA256 = strings.Repeat("ab", 32)
			return b
		}, 0, "its SHA-256 is " + sha(good) + ", but the version is registered with " + strings.Repeat("ab", 32)},
		{"parent path entry", func() Build {
			return rs.put("/evil.zip", zipOf(t, [2]string{"terraform", script("3.0.0")}, [2]string{"../evil", "x"}))
		}, 0, `entry "../evil" outside its own folder`},
		{"nested parent path entry", func() Build {
			return rs.put("/evil2.zip", zipOf(t, [2]string{"docs/../../evil", "x"}, [2]string{"terraform", script("3.0.0")}))
		}, 0, `entry "docs/../../evil" outside`},
		{"absolute entry", func() Build {
			return rs.put("/abs.zip", zipOf(t, [2]string{"/evil", "x"}, [2]string{"terraform", script("3.0.0")}))
		}, 0, `entry "/evil" outside`},
		{"backslash entry", func() Build {
			return rs.put("/bs.zip", zipOf(t, [2]string{`..\evil`, "x"}, [2]string{"terraform", script("3.0.0")}))
		}, 0, "outside"},
		{"no binary", func() Build {
			return rs.put("/empty.zip", zipOf(t, [2]string{"bin/terraform", script("3.0.0")}))
		}, 0, "has no terraform at its top"},
		{"not a zip", func() Build { return rs.put("/html.zip", []byte("<html>")) }, 0, "not a zip"},
		{"missing", func() Build {
			b := rs.put("/x.zip", good)
			b.URL = rs.URL + "/missing.zip"
			return b
		}, 0, "404 Not Found"},
		{"archive too large", func() Build { return rs.put("/good.zip", good) }, 16, "more than the limit of 16"},
		{"not http", func() Build {
			b := rs.put("/good.zip", good)
			b.URL = "file:///etc/passwd"
			return b
		}, 0, "not an http or https URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &Finder{Dir: t.TempDir(), HTTP: rs.Client(), MaxArchive: c.limit}
			_, _, err := f.FindOrInstall(context.Background(), "3.0.0", &Release{Name: "terraform", Version: "3.0.0", Builds: []Build{c.build()}})
			var re *ReleaseError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a ReleaseError saying %q", err, c.want)
			}
			if got := entries(t, f.Dir); got != "" {
				t.Fatalf("a refused install left %s in the engines folder", got)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(f.Dir), "evil")); err == nil {
				t.Fatal("an entry was written outside the engines folder")
			}
		})
	}

	// A binary larger than the limit (whatever the zip's directory says).
	f := &Finder{Dir: t.TempDir(), HTTP: rs.Client(), MaxBinary: 8}
	_, _, err := f.FindOrInstall(context.Background(), "3.0.0", &Release{Name: "terraform", Version: "3.0.0", Builds: []Build{rs.put("/good.zip", good)}})
	var re *ReleaseError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "more than the limit of 8") || entries(t, f.Dir) != "" {
		t.Fatalf("a binary over the limit: %v, folder %q", err, entries(t, f.Dir))
	}

	// A folder put there by hand is not replaced.
	f = &Finder{Dir: t.TempDir(), HTTP: rs.Client()}
	own := filepath.Join(f.Dir, "terraform", "3.0.0")
	if err := os.MkdirAll(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, "terraform"), []byte(script("2.9.9")), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err = f.FindOrInstall(context.Background(), "3.0.0", &Release{Name: "terraform", Version: "3.0.0", Builds: []Build{rs.put("/good.zip", good)}})
	if err == nil || !strings.Contains(err.Error(), "was not installed by Terrace") {
		t.Fatalf("installing over a folder put there by hand: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(own, "terraform")); string(got) != script("2.9.9") {
		t.Fatal("the binary put there by hand was replaced")
	}
}

// TestFindOrInstallLeavesOthersAlone: no download without a build for
// this platform or when the version is installed already, and none
// without an engines folder.
func TestFindOrInstallLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	rs := newReleaseServer(t)
	ctx := context.Background()
	good := rs.put("/good.zip", zipOf(t, [2]string{"terraform", script("4.0.0")}))

	f := &Finder{Dir: t.TempDir(), HTTP: rs.Client()}
	other := good
	other.Arch = "not-" + runtime.GOARCH
	if _, _, err := f.FindOrInstall(ctx, "4.0.0", &Release{Name: "terraform", Version: "4.0.0", Builds: []Build{other}}); err == nil || !strings.Contains(err.Error(), "4.0.0 is not installed") {
		t.Fatalf("no build for this platform: %v", err)
	}
	// Put there by hand (reporting its version): used, nothing downloaded.
	own := filepath.Join(f.Dir, "terraform", "4.0.0", "terraform")
	if err := os.MkdirAll(filepath.Dir(own), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(own, []byte(script("4.0.0")), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, installed, err := f.FindOrInstall(ctx, "4.0.0", &Release{Name: "terraform", Version: "4.0.0", Builds: []Build{good}}); err != nil || p != own || installed != nil {
		t.Fatalf("a version installed by hand: %q %+v %v", p, installed, err)
	}
	if _, _, err := (&Finder{HTTP: rs.Client()}).FindOrInstall(ctx, "4.0.0", &Release{Name: "terraform", Version: "4.0.0", Builds: []Build{good}}); err == nil || !strings.Contains(err.Error(), "no engines folder") {
		t.Fatalf("without an engines folder: %v", err)
	}
	if n := rs.count("/good.zip"); n != 0 {
		t.Fatalf("the zip was downloaded %d times, want never", n)
	}
}

// TestInstallSweepsAbandonedFolders: an install removes what installs
// killed before their cleanup left in the engines folder (a folder with a
// partial zip, a previous install moved aside), once nothing has written
// to it for an hour, and leaves alone an install still writing its zip
// and everything else in the folder.
func TestInstallSweepsAbandonedFolders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := time.Now().Add(-2 * time.Hour)
	write := func(path string, at time.Time) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		for p := path; p != dir; p = filepath.Dir(p) {
			if err := os.Chtimes(p, at, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(filepath.Join(dir, ".install-terraform-1.0.98-111", "release.zip"), old)                    // killed mid-download
	write(filepath.Join(dir, ".install-terraform-1.0.97-222.old", "terraform"), old)                  // killed between its renames
	write(filepath.Join(dir, ".install-terraform-1.0.96-333", "release.zip"), time.Now())             // another process, downloading
	write(filepath.Join(dir, "terraform", "1.0.1", "terraform"), old)                                 // installed by hand long ago
	if err := os.Chtimes(filepath.Join(dir, ".install-terraform-1.0.96-333"), old, old); err != nil { // its folder made long ago
		t.Fatal(err)
	}

	rs := newReleaseServer(t)
	b := rs.put("/terraform_1.0.99.zip", zipOf(t, [2]string{"terraform", script("1.0.99")}))
	f := &Finder{Dir: dir, HTTP: rs.Client()}
	if _, _, err := f.FindOrInstall(context.Background(), "1.0.99", &Release{Name: "terraform", Version: "1.0.99", Builds: []Build{b}}); err != nil {
		t.Fatal(err)
	}
	want := ".install-terraform-1.0.96-333, .install-terraform-1.0.96-333/release.zip, terraform, terraform/1.0.1, terraform/1.0.1/terraform, " +
		"terraform/1.0.99, terraform/1.0.99/" + recordFile + ", terraform/1.0.99/terraform"
	if got := entries(t, dir); got != want {
		t.Fatalf("after an install the engines folder holds\n%s\nwant\n%s", got, want)
	}
}

// TestVersionConstraints: a workspace version that is a constraint runs
// the newest version it allows: the one the server resolved it to from
// the registered versions (installed when missing), else the newest in
// the engines folder or on PATH. Prereleases only when the constraint
// names one; none allowed is an error naming the constraint.
func TestVersionConstraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &Finder{Dir: t.TempDir()}
	for _, v := range []string{"1.9.1", "1.9.5", "1.9.6-beta1", "1.10.0"} {
		p := filepath.Join(f.Dir, "terraform", v, "terraform")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(script(v)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	at := func(v string) string { return filepath.Join(f.Dir, "terraform", v, "terraform") }
	for constraint, want := range map[string]string{
		"~> 1.9.0":          at("1.9.5"),
		">= 1.9.2, < 1.9.5": "",
		">= 1.10, < 1.11":   at("1.10.0"),
		"< 1.9.5":           at("1.9.1"),
		"1.9.6-beta1":       at("1.9.6-beta1"),
		"= 1.9.6-beta1":     at("1.9.6-beta1"),
		"~> 7.0":            "",
	} {
		p, err := f.Find(ctx, constraint)
		switch {
		case want == "" && (err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(constraint, "v"))):
			t.Errorf("Find(%q): %q %v, want an error naming the constraint", constraint, p, err)
		case want != "" && (err != nil || p != want):
			t.Errorf("Find(%q): %q %v, want %s", constraint, p, err, want)
		}
	}
	if c := Constraint("1.9.5"); c != nil {
		t.Errorf("a version is taken for a constraint: %v", c)
	}
	if c := Constraint("latest"); c != nil {
		t.Errorf("latest is taken for a constraint: %v", c)
	}

	// The server resolved the constraint to a registered version that is
	// not installed: that one is installed and run.
	rs := newReleaseServer(t)
	b := rs.put("/terraform_1.9.7.zip", zipOf(t, [2]string{"terraform", script("1.9.7")}))
	f.HTTP = rs.Client()
	p, installed, err := f.FindOrInstall(ctx, "~> 1.9.0", &Release{Name: "terraform", Version: "1.9.7", Builds: []Build{b}})
	if err != nil || p != at("1.9.7") || installed == nil {
		t.Fatalf("FindOrInstall(~> 1.9.0) with 1.9.7 registered: %q %+v %v, want %s installed", p, installed, err, at("1.9.7"))
	}
	// A registration the constraint does not allow is not used.
	other := rs.put("/terraform_1.8.0.zip", zipOf(t, [2]string{"terraform", script("1.8.0")}))
	if p, installed, err := f.FindOrInstall(ctx, "~> 1.9.0", &Release{Name: "terraform", Version: "1.8.0", Builds: []Build{other}}); err != nil || p != at("1.9.7") || installed != nil {
		t.Fatalf("FindOrInstall(~> 1.9.0) given 1.8.0: %q %+v %v, want the installed %s", p, installed, err, at("1.9.7"))
	}
	if n := rs.count("/terraform_1.8.0.zip"); n != 0 {
		t.Fatalf("a release the constraint does not allow was downloaded %d times", n)
	}
}

// TestLatestAndTheChosenVersion: "latest" is the release the server
// resolved it to (the newest registered) when that is newer than the
// terraform on PATH, and the one on PATH otherwise, never downloading an
// older registration; the version chosen is exact for the run to record
// (Chosen), and a run that names an exact version records nothing. Not
// parallel: it sets PATH.
func TestLatestAndTheChosenVersion(t *testing.T) {
	ctx := context.Background()
	pathDir := t.TempDir()
	onPath := filepath.Join(pathDir, "terraform")
	if err := os.WriteFile(onPath, []byte(script("1.10.2")), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", pathDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	rs := newReleaseServer(t)
	f := &Finder{Dir: t.TempDir(), HTTP: rs.Client()}

	older := rs.put("/1.9.0.zip", zipOf(t, [2]string{"terraform", script("1.9.0")}))
	for _, rel := range []*Release{nil, {Name: "terraform", Version: "1.9.0", Builds: []Build{older}}, {Name: "terraform", Version: "1.10.2", Builds: []Build{older}}} {
		p, installed, err := f.FindOrInstall(ctx, "latest", rel)
		if err != nil || p != onPath || installed != nil {
			t.Fatalf("latest with %+v registered: %q %+v %v, want the terraform on PATH", rel, p, installed, err)
		}
		if got := f.Chosen(ctx, "latest", p); got != "1.10.2" {
			t.Fatalf("latest on PATH: the chosen version is %q, want 1.10.2", got)
		}
	}
	if n := rs.count("/1.9.0.zip"); n != 0 {
		t.Fatalf("an older registration was downloaded %d times for latest", n)
	}

	newer := rs.put("/1.11.0.zip", zipOf(t, [2]string{"terraform", script("1.11.0")}))
	rel := &Release{Name: "terraform", Version: "1.11.0", Builds: []Build{newer}}
	for _, latest := range []string{"latest", ""} {
		p, _, err := f.FindOrInstall(ctx, latest, rel)
		want := filepath.Join(f.Dir, "terraform", "1.11.0", "terraform")
		if err != nil || p != want {
			t.Fatalf("%q with a newer registration: %q %v, want %s", latest, p, err, want)
		}
		if !Registered(p) || Registered(onPath) {
			t.Fatalf("Registered: %v for the installed release, %v for PATH's; want only the first", Registered(p), Registered(onPath))
		}
		if got := f.Chosen(ctx, latest, p); got != "1.11.0" {
			t.Fatalf("%q installed from a registration: the chosen version is %q, want 1.11.0", latest, got)
		}
		// The apply asks for what the plan recorded: the same binary.
		if again, _, err := f.FindOrInstall(ctx, "1.11.0", rel); err != nil || again != p {
			t.Fatalf("the recorded 1.11.0: %q %v, want %s", again, err, p)
		}
	}
	if n := rs.count("/1.11.0.zip"); n != 1 {
		t.Fatalf("the newer registration was downloaded %d times, want once", n)
	}
	if got := f.Chosen(ctx, "~> 1.10.0", onPath); got != "1.10.2" {
		t.Fatalf("a constraint's chosen version: %q, want 1.10.2", got)
	}
	if got := f.Chosen(ctx, "tofu", onPath); got != "tofu:1.10.2" {
		t.Fatalf("tofu's chosen version: %q, want tofu:1.10.2", got)
	}
	for _, exact := range []string{"1.10.2", "v1.10.2", "tofu:1.8.0"} {
		if got := f.Chosen(ctx, exact, onPath); got != "" {
			t.Fatalf("an exact version %q records %q, want nothing", exact, got)
		}
	}
}
