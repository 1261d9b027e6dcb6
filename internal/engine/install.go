package engine

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Release is a version a site admin registered (internal/toolversion):
// where a runner downloads it for each platform it has a build for. A
// runner that lacks the version installs it from here (FindOrInstall).
type Release struct {
	// Name is the engine: "terraform".
	Name    string  `json:"name"`
	Version string  `json:"version"`
	Builds  []Build `json:"builds"`
}

// Build is one platform's zip of a release, and the SHA-256 (hex) it
// must have.
type Build struct {
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// Platform names the build as release zips do: "linux_amd64".
func (b Build) Platform() string { return b.OS + "_" + b.Arch }

// build returns the release's build for a platform (nil for none, and
// for a nil release).
func (r *Release) build(goos, goarch string) *Build {
	if r == nil {
		return nil
	}
	for i := range r.Builds {
		if r.Builds[i].OS == goos && r.Builds[i].Arch == goarch {
			return &r.Builds[i]
		}
	}
	return nil
}

// ReleaseError is an install refused because of the release itself: its
// URL answers an error, its zip's checksum is not the registered one, or
// the zip is unsafe, too large or has no binary. The machine is fine: the
// registration needs correcting.
type ReleaseError struct{ Err error }

func (e *ReleaseError) Error() string { return e.Err.Error() }
func (e *ReleaseError) Unwrap() error { return e.Err }

func releaseErr(format string, args ...any) error {
	return &ReleaseError{Err: fmt.Errorf(format, args...)}
}

// Default limits of an install: what a release zip (terraform's is about
// 30 MB) and the binary in it (about 90 MB) may weigh.
const (
	DefaultMaxArchive = 512 << 20
	DefaultMaxBinary  = 1 << 30
)

// recordFile, beside an installed binary, says which build it came from.
// A binary with one is the release a site admin registered under its
// version: the finder takes it for that version without asking it (the
// registered zip's checksum vouches for it, and a registration may label
// a build as the admin chooses).
const recordFile = ".terrace-install.json"

type record struct {
	URL         string    `json:"url"`
	SHA256      string    `json:"sha256"`
	OS          string    `json:"os"`
	Arch        string    `json:"arch"`
	InstalledAt time.Time `json:"installed_at"`
}

func (r *record) matches(b *Build) bool {
	return r != nil && strings.EqualFold(r.SHA256, b.SHA256) && r.OS == b.OS && r.Arch == b.Arch
}

// readRecord reads the install record of a version folder (nil when it
// has none, or one that does not parse).
func readRecord(dir string) *record {
	raw, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return nil
	}
	var r record
	if json.Unmarshal(raw, &r) != nil {
		return nil
	}
	return &r
}

// versionRE is what may name a version folder: a version, never a path.
var versionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// FindOrInstall is Find for a run whose version may be registered (rel:
// nil when it is not, or is disabled). With a build of rel for this
// machine's platform, the version is what a site admin registered: the
// binary installed from that build, else one put in the engines folder
// or on PATH by hand, else the build is downloaded, checked and installed
// into the engines folder, and installed is that build. Without one, it
// is Find.
//
// A constraint is resolved by the server to the newest registered version
// it allows (rel): that version is the one found or installed here. With
// none registered, it is Find: the newest installed that it allows.
//
// "latest" is resolved by the server to the newest registered, enabled
// release (rel): that one, unless the binary on this runner's PATH is as
// new or newer, which is then used. So registering an older
// version never takes a "latest" workspace back to it, and registering a
// newer one moves every "latest" workspace to it from its next run.
func (f *Finder) FindOrInstall(ctx context.Context, version string, rel *Release) (path string, installed *Build, err error) {
	name, want := parseVersion(version)
	resolved := rel != nil && rel.Name == name
	if c := Constraint(version); c != nil {
		resolved = resolved && Allows(c, rel.Version)
	} else if latest(want) {
		resolved = resolved && !f.onPathAtLeast(ctx, name, rel.Version)
	} else {
		resolved = false
	}
	if resolved {
		want, version = rel.Version, rel.Version
		if name != "terraform" {
			version = name + ":" + want
		}
	}
	b := rel.build(runtime.GOOS, runtime.GOARCH)
	if b == nil || rel.Name != name || rel.Version != want {
		p, err := f.Find(ctx, version)
		return p, nil, err
	}
	if f.Dir == "" {
		if p, err := f.Find(ctx, version); err == nil {
			return p, nil, nil
		}
		return "", nil, fmt.Errorf("%s %s is registered for download, but %s has no engines folder to install it in: give it one (--engines-dir)", name, want, f.host())
	}
	dir := filepath.Join(f.Dir, name, want)
	if rec := readRecord(dir); rec != nil {
		if rec.matches(b) {
			p, err := filepath.Abs(filepath.Join(dir, name))
			return p, nil, err
		}
		// Installed from a build the registration no longer names:
		// replaced below.
	} else if p, err := f.Find(ctx, version); err == nil {
		return p, nil, nil
	}
	p, err := f.installOnce(ctx, name, want, *b)
	if err != nil {
		return "", nil, err
	}
	p, err = filepath.Abs(p)
	return p, b, err
}

// installation is one install in progress, which other runs asking for
// the same build wait for.
type installation struct {
	done chan struct{}
	path string
	err  error
}

// installOnce installs a build, once for every run of this process that
// asks for it at the same time: the others wait for the first.
func (f *Finder) installOnce(ctx context.Context, name, version string, b Build) (string, error) {
	key := name + "/" + version + "/" + strings.ToLower(b.SHA256)
	for {
		f.mu.Lock()
		if in, ok := f.installs[key]; ok {
			f.mu.Unlock()
			select {
			case <-in.done:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			// The first run was canceled while it downloaded: this one
			// is not, so it installs the build itself.
			if in.err != nil && (errors.Is(in.err, context.Canceled) || errors.Is(in.err, context.DeadlineExceeded)) && ctx.Err() == nil {
				continue
			}
			return in.path, in.err
		}
		in := &installation{done: make(chan struct{})}
		if f.installs == nil {
			f.installs = map[string]*installation{}
		}
		f.installs[key] = in
		f.mu.Unlock()
		in.path, in.err = f.install(ctx, name, version, b)
		f.mu.Lock()
		delete(f.installs, key)
		f.mu.Unlock()
		close(in.done)
		return in.path, in.err
	}
}

// install downloads a build into a folder of its own in the engines
// folder, checks the zip's SHA-256 before it opens it, extracts the
// binary alone, and only then moves the folder into place as
// <dir>/<name>/<version> with one rename: a run never sees a partial
// install, and a refused one leaves nothing behind.
func (f *Finder) install(ctx context.Context, name, version string, b Build) (string, error) {
	if !versionRE.MatchString(version) {
		return "", releaseErr("%q is not a version %s can be installed as", version, name)
	}
	final := filepath.Join(f.Dir, name, version)
	// Another process (an agent sharing the folder) may have installed it.
	if readRecord(final).matches(&b) {
		return filepath.Join(final, name), nil
	}
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return "", fmt.Errorf("making the engines folder: %w", err)
	}
	f.sweepAbandoned(time.Now())
	tmp, err := os.MkdirTemp(f.Dir, installPrefix+name+"-"+version+"-")
	if err != nil {
		return "", fmt.Errorf("making a folder to install %s %s in: %w", name, version, err)
	}
	defer os.RemoveAll(tmp) // gone already once renamed into place
	what := fmt.Sprintf("%s %s for %s from %s", name, version, b.Platform(), b.URL)
	archive := filepath.Join(tmp, "release.zip")
	sum, err := f.download(ctx, b.URL, archive)
	if err != nil {
		return "", fmt.Errorf("downloading %s: %w", what, err)
	}
	if !strings.EqualFold(sum, b.SHA256) {
		return "", releaseErr("downloading %s: its SHA-256 is %s, but the version is registered with %s: nothing was installed (a site admin corrects the url or sha in the admin terraform versions API)", what, sum, strings.ToLower(b.SHA256))
	}
	bin := filepath.Join(tmp, name)
	if err := f.extract(archive, name, bin); err != nil {
		return "", fmt.Errorf("installing %s: %w", what, err)
	}
	if err := os.Remove(archive); err != nil {
		return "", err
	}
	rec, _ := json.Marshal(record{URL: b.URL, SHA256: strings.ToLower(b.SHA256), OS: b.OS, Arch: b.Arch, InstalledAt: time.Now().UTC()})
	if err := writeSynced(filepath.Join(tmp, recordFile), rec, 0o644); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", err
	}
	// An earlier install of another build of the version goes aside
	// first (a folder is not renamed over a full one), and is removed
	// once the new one is in place.
	if _, err := os.Lstat(final); err == nil {
		if readRecord(final) == nil {
			return "", fmt.Errorf("installing %s: %s exists and was not installed by Terrace: remove it, or put %s %s there yourself", what, final, name, version)
		}
		old := tmp + ".old"
		if err := os.Rename(final, old); err != nil {
			return "", err
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, final); err != nil {
		if readRecord(final).matches(&b) {
			return filepath.Join(final, name), nil // another process was first
		}
		return "", fmt.Errorf("installing %s: %w", what, err)
	}
	syncDir(filepath.Dir(final))
	return filepath.Join(final, name), nil
}

// installPrefix starts the name of an install's own folder in the
// engines folder (and of the previous install it moves aside, with .old).
const installPrefix = ".install-"

// abandonedAfter is how long an install's folder goes without a write
// before it counts as abandoned: its process was killed mid-download or
// mid-rename. A download in progress writes its zip all the time.
const abandonedAfter = time.Hour

// sweepAbandoned removes install folders nothing has written to for
// abandonedAfter: what an install killed before its cleanup left behind
// (up to a whole release zip each). Another process sharing the folder
// may be installing right now, so a folder is judged by its newest write,
// its own or a file's in it; a folder that cannot be read is left alone.
func (f *Finder) sweepAbandoned(now time.Time) {
	ents, err := os.ReadDir(f.Dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), installPrefix) {
			continue
		}
		dir := filepath.Join(f.Dir, e.Name())
		last, ok := lastWrite(dir)
		if ok && now.Sub(last) > abandonedAfter {
			_ = os.RemoveAll(dir)
		}
	}
}

// lastWrite is the newest modification time of dir and what it holds.
func lastWrite(dir string) (time.Time, bool) {
	var last time.Time
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.ModTime().After(last) {
			last = info.ModTime()
		}
		return nil
	})
	return last, err == nil
}

func (f *Finder) maxArchive() int64 {
	if f.MaxArchive > 0 {
		return f.MaxArchive
	}
	return DefaultMaxArchive
}

func (f *Finder) maxBinary() int64 {
	if f.MaxBinary > 0 {
		return f.MaxBinary
	}
	return DefaultMaxBinary
}

// download writes what u answers to file, at most maxArchive bytes, and
// returns its SHA-256 (hex).
func (f *Finder) download(ctx context.Context, u, file string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
		return "", releaseErr("%q is not an http or https URL", u)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", releaseErr("%v", err)
	}
	hc := f.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", releaseErr("the URL answered %s", resp.Status)
	}
	limit := f.maxArchive()
	if resp.ContentLength > limit {
		return "", releaseErr("the zip is %d bytes, more than the limit of %d", resp.ContentLength, limit)
	}
	out, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	defer out.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return "", err
	}
	if n > limit {
		return "", releaseErr("the zip is more than the limit of %d bytes", limit)
	}
	return hex.EncodeToString(h.Sum(nil)), out.Close()
}

// extract writes the zip's top-level binary name to dst, refusing the
// whole zip when any entry names a path outside it: the zip is the
// registered one, but what it holds is not trusted.
func (f *Finder) extract(archive, name, dst string) error {
	zr, err := zip.OpenReader(archive)
	if err != nil {
		return releaseErr("the download is not a zip: %v", err)
	}
	defer zr.Close()
	var entry *zip.File
	for _, e := range zr.File {
		if !localEntry(e.Name) {
			return releaseErr("the zip holds an entry %q outside its own folder: refused, nothing was installed", e.Name)
		}
		if strings.TrimPrefix(e.Name, "./") == name {
			entry = e
		}
	}
	if entry == nil {
		return releaseErr("the zip has no %s at its top", name)
	}
	if !entry.Mode().IsRegular() {
		return releaseErr("the zip's %s is not a regular file", name)
	}
	limit := f.maxBinary()
	if entry.UncompressedSize64 > uint64(limit) {
		return releaseErr("the zip's %s is %d bytes, more than the limit of %d", name, entry.UncompressedSize64, limit)
	}
	rc, err := entry.Open()
	if err != nil {
		return releaseErr("reading the zip's %s: %v", name, err)
	}
	defer rc.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	defer out.Close()
	// The size in the zip's directory is the zip's word: the copy stops
	// at the limit whatever it says, and the entry's checksum is checked
	// as the reader reaches its end.
	n, err := io.Copy(out, io.LimitReader(rc, limit+1))
	if err != nil {
		return releaseErr("reading the zip's %s: %v", name, err)
	}
	if n > limit {
		return releaseErr("the zip's %s is more than the limit of %d bytes", name, limit)
	}
	if err := out.Sync(); err != nil {
		return err
	}
	return out.Close()
}

// localEntry reports whether a zip entry's name stays inside the folder
// it is extracted into: relative, no "..", no backslash, no volume.
func localEntry(name string) bool {
	if name == "" || strings.Contains(name, `\`) || strings.HasPrefix(name, "/") {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return false
		}
	}
	return filepath.IsLocal(filepath.FromSlash(strings.TrimSuffix(name, "/")))
}

func writeSynced(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes a rename in dir durable (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// DownloadClient is the HTTP client a finder downloads releases with:
// the system's CAs, and those in caFile (PEM) when it is set, for a
// mirror whose certificate a private CA signed.
func DownloadClient(caFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading the engines CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the engines CA file %s holds no PEM certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}, nil
}
