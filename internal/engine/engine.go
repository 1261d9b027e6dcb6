// Package engine finds the terraform or tofu binary a workspace asks for:
// first in the engines folder (<dir>/terraform/<version>/terraform,
// <dir>/tofu/<version>/tofu), then on PATH; and installs into the engines
// folder a version a site admin registered with a download URL and
// checksum when neither has it (install.go).
package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	goversion "github.com/hashicorp/go-version"
)

// Finder locates engine binaries and remembers their versions.
type Finder struct {
	// Dir is the engines folder ("" for none).
	Dir string
	// Host names the machine the binaries are looked for on, in the
	// message of a missing one ("" for this server): an agent names
	// itself, so that the run's log says where to install it.
	Host string
	// HTTP downloads registered releases (FindOrInstall); nil is
	// http.DefaultClient. DownloadClient makes one that trusts a
	// private CA too.
	HTTP *http.Client
	// MaxArchive and MaxBinary bound a release's zip and the binary in
	// it (0: DefaultMaxArchive, DefaultMaxBinary).
	MaxArchive, MaxBinary int64

	mu       sync.Mutex
	versions map[binaryKey]string
	installs map[string]*installation
}

// binaryKey names one build of a binary: its path, size and modification
// time. A binary replaced in place (an upgrade in the engines folder) is a
// new key, so its version is asked again; an unchanged one never is.
type binaryKey struct {
	path  string
	size  int64
	mtime int64
}

// Find returns the absolute path of a binary for version: "latest" or ""
// means the terraform (else tofu) on PATH; "tofu" or "tofu:<v>" asks for
// OpenTofu. Absolute, because the binary is started in a job's folder:
// a relative engines folder or PATH entry would be looked up from there.
func (f *Finder) Find(ctx context.Context, version string) (string, error) {
	bin, err := f.find(ctx, version)
	if err != nil {
		return "", err
	}
	return filepath.Abs(bin)
}

// parseVersion splits a workspace's terraform version into the engine's
// name and the version wanted ("" or "latest" for the one on PATH).
func parseVersion(version string) (name, want string) {
	name, want = "terraform", strings.TrimPrefix(strings.TrimSpace(version), "v")
	if v, ok := strings.CutPrefix(want, "tofu"); ok {
		name, want = "tofu", strings.TrimPrefix(strings.TrimPrefix(v, ":"), "-")
	}
	return name, want
}

// latest reports whether the version wanted (parseVersion's) is "latest"
// or none, which mean the same.
func latest(want string) bool { return want == "" || want == "latest" }

// Constraint is the version constraint a workspace's terraform version
// is ("~> 1.9.0", ">= 1.5, < 2.0"), or nil when it is a version, "latest"
// or "". Versions a constraint allows are chosen as go-version checks
// them, as terraform's own required_version is: prereleases only when the
// constraint names one.
func Constraint(version string) goversion.Constraints {
	_, want := parseVersion(version)
	if latest(want) || versionRE.MatchString(want) {
		return nil
	}
	c, err := goversion.NewConstraint(want)
	if err != nil {
		return nil
	}
	return c
}

// Exact reports whether a workspace's terraform version names one
// version ("1.9.5", "tofu:1.8.0"), not "latest" or a constraint.
func Exact(version string) bool {
	_, want := parseVersion(version)
	return versionRE.MatchString(want)
}

// Chosen is the exact version, as a workspace would name it, of the
// binary at path that Find or FindOrInstall chose for version; "" when
// version is exact already (or the binary's version cannot be read). A
// binary installed from a registration is the version it was registered
// as. A run records it with its plan, so that a later apply, wherever it
// runs, uses the version that made the plan, whatever "latest" or the
// constraint would choose by then.
func (f *Finder) Chosen(ctx context.Context, version, path string) string {
	if Exact(version) {
		return ""
	}
	name, _ := parseVersion(version)
	v := f.versionOf(ctx, path)
	switch {
	case !versionRE.MatchString(v):
		return ""
	case name == "terraform":
		return v
	}
	return name + ":" + v
}

// Registered reports whether the binary at path was installed from a
// registered release (rather than found on PATH or put in the engines
// folder by hand).
func Registered(path string) bool { return readRecord(filepath.Dir(path)) != nil }

// versionOf is the version of the binary at p: the version it was
// registered as when it was installed from a registration, else what it
// says of itself ("" when it cannot say).
func (f *Finder) versionOf(ctx context.Context, p string) string {
	if Registered(p) {
		return filepath.Base(filepath.Dir(p))
	}
	v, _ := f.version(ctx, p)
	return v
}

// Allows reports whether the constraint c allows the version v.
func Allows(c goversion.Constraints, v string) bool {
	pv, err := goversion.NewVersion(v)
	return err == nil && c.Check(pv)
}

func (f *Finder) find(ctx context.Context, version string) (string, error) {
	name, want := parseVersion(version)
	if c := Constraint(version); c != nil {
		return f.findAllowed(ctx, name, want, c)
	}
	if latest(want) {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		if name == "terraform" {
			if p, err := exec.LookPath("tofu"); err == nil {
				return p, nil
			}
		}
		return "", fmt.Errorf("no %s binary found on %s: put one on its PATH or in its engines folder", name, f.host())
	}
	var candidates []string
	if f.Dir != "" {
		// Installed from a registered release: the version it was
		// registered as, whatever the binary says of itself.
		if versionRE.MatchString(want) && readRecord(filepath.Join(f.Dir, name, want)) != nil {
			p := filepath.Join(f.Dir, name, want, name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, nil
			}
		}
		for _, n := range []string{name, "terraform", "tofu"} {
			candidates = append(candidates, filepath.Join(f.Dir, n, want, n), filepath.Join(f.Dir, n+"_"+want), filepath.Join(f.Dir, n+"-"+want))
		}
	}
	for _, n := range []string{name, "terraform", "tofu"} {
		if p, err := exec.LookPath(n); err == nil {
			candidates = append(candidates, p)
		}
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err != nil || st.IsDir() {
			continue
		}
		if v, err := f.version(ctx, c); err == nil && v == want {
			return c, nil
		}
	}
	where := "on PATH"
	if f.Dir != "" {
		where = fmt.Sprintf("in %s (as %s/%s/%s) or on PATH", f.Dir, name, want, name)
	}
	return "", fmt.Errorf("%s %s is not installed on %s: put it %s, or set the workspace's terraform version to one that is", name, want, f.host(), where)
}

// findAllowed is find for a constraint: of the binaries of the engine in
// the engines folder and on PATH, the newest the constraint allows.
func (f *Finder) findAllowed(ctx context.Context, name, want string, c goversion.Constraints) (string, error) {
	var candidates []string
	if f.Dir != "" {
		for _, pattern := range []string{filepath.Join(f.Dir, name, "*", name), filepath.Join(f.Dir, name+"_*"), filepath.Join(f.Dir, name+"-*")} {
			m, _ := filepath.Glob(pattern)
			candidates = append(candidates, m...)
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		candidates = append(candidates, p)
	}
	var best string
	var bestV *goversion.Version
	for _, p := range candidates {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			continue
		}
		pv, err := goversion.NewVersion(f.versionOf(ctx, p))
		if err != nil || !c.Check(pv) || (bestV != nil && !pv.GreaterThan(bestV)) {
			continue
		}
		best, bestV = p, pv
	}
	if best == "" {
		where := "on PATH"
		if f.Dir != "" {
			where = fmt.Sprintf("in %s (as %s/<version>/%s) or on PATH", f.Dir, name, name)
		}
		return "", fmt.Errorf("no %s version that %q allows is installed on %s: put one %s, register one for download, or set the workspace's terraform version to one that is", name, want, f.host(), where)
	}
	return best, nil
}

// onPathAtLeast reports whether the binary of the engine name on PATH
// (the one "latest" means without registrations) is version v or newer.
func (f *Finder) onPathAtLeast(ctx context.Context, name, v string) bool {
	p, err := exec.LookPath(name)
	if err != nil {
		return false
	}
	got, err := f.version(ctx, p)
	if err != nil {
		return false
	}
	have, err1 := goversion.NewVersion(got)
	want, err2 := goversion.NewVersion(v)
	return err1 == nil && err2 == nil && !have.LessThan(want)
}

func (f *Finder) host() string {
	if f.Host == "" {
		return "this server"
	}
	return f.Host
}

func (f *Finder) version(ctx context.Context, bin string) (string, error) {
	st, err := os.Stat(bin)
	if err != nil {
		return "", err
	}
	key := binaryKey{path: bin, size: st.Size(), mtime: st.ModTime().UnixNano()}
	f.mu.Lock()
	if v, ok := f.versions[key]; ok {
		f.mu.Unlock()
		return v, nil
	}
	f.mu.Unlock()
	cmd := exec.CommandContext(ctx, bin, "version", "-json")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=/dev/null"}
	out, err := cmd.Output()
	if err != nil {
		return "", err
	}
	var doc struct {
		Version         string `json:"terraform_version"`
		OpenTofuVersion string `json:"opentofu_version"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return "", err
	}
	v := strings.TrimSuffix(doc.Version, "-dev")
	if v == "" {
		v = strings.TrimSuffix(doc.OpenTofuVersion, "-dev")
	}
	f.mu.Lock()
	if f.versions == nil {
		f.versions = map[binaryKey]string{}
	}
	f.versions[key] = v
	f.mu.Unlock()
	return v, nil
}

// Version returns the version of the binary at path, asking the binary
// only the first time it is seen (by path, size and modification time).
func (f *Finder) Version(ctx context.Context, path string) (string, error) {
	return f.version(ctx, path)
}
