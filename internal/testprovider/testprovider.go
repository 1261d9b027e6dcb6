// Package testprovider builds Terrace's stand-in providers (hashicorp/null
// from cmd/terraform-provider-null, hashicorp/time from
// cmd/terraform-provider-time, hashicorp/local from
// cmd/terraform-provider-local) and lays them out as a filesystem mirror, so
// terraform and OpenTofu can run configurations that use null_resource,
// time_sleep and local_file on a machine without internet access.
//
// Tests call Install(t) and write the returned text into the CLI config file
// they point TF_CLI_CONFIG_FILE at. Tools and long-lived harnesses call
// WriteMirror(dir, Options{}) instead. Only one provider_installation block is
// allowed in a CLI config file, so the caller must not add another.
package testprovider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Namespace is the registry namespace of every stand-in: hashicorp/<type>.
const Namespace = "hashicorp"

// Version is the release the null provider reports and is mirrored as
// (a real hashicorp/null release, so "~> 3.2" resolves).
const Version = "3.2.4"

// Provider is one stand-in provider to mirror.
type Provider struct {
	// Type is the provider type, as in hashicorp/<Type>; its Go package is
	// cmd/terraform-provider-<Type> in this module.
	Type string
	// Versions are the version directories to lay out. All hold the same
	// binary: terraform does not check the version a provider reports.
	Versions []string
	// Binary, if set, is an executable built beforehand (for the platform
	// in Options); WriteMirror then lays it out instead of building.
	Binary string
}

var (
	// Null is hashicorp/null: null_resource and null_data_source.
	Null = Provider{Type: "null", Versions: []string{Version}}
	// Time is hashicorp/time, with time_sleep only (go-tfe's test-run
	// fixture uses it).
	Time = Provider{Type: "time", Versions: []string{"0.13.1"}}
	// Local is hashicorp/local with local_file only: a resource whose real
	// object (a file) can change behind terraform's back, for drift tests.
	// Not mirrored by default; pass it in Options.Providers.
	Local = Provider{Type: "local", Versions: []string{"2.5.2"}}
)

// Hosts are the registry hostnames the mirror answers for. Terraform expands
// source "hashicorp/null" (and an implicit null_resource) to
// registry.terraform.io; OpenTofu expands it to registry.opentofu.org.
var Hosts = []string{"registry.terraform.io", "registry.opentofu.org"}

// Options tune WriteMirror. The zero value mirrors Null and Time for the
// platform this process runs on.
type Options struct {
	// GOOS and GOARCH select the platform to build for and the
	// <os>_<arch> directory of the mirror; they default to runtime.GOOS
	// and runtime.GOARCH (terraform looks up its own platform).
	GOOS, GOARCH string
	// Providers to mirror; default Null and Time. To serve a pinned older
	// version too (go-tfe's stack fixture pins null 3.1.1), pass
	// Provider{Type: "null", Versions: []string{"3.2.4", "3.1.1"}}.
	Providers []Provider
}

func (o Options) withDefaults() Options {
	if o.GOOS == "" {
		o.GOOS = runtime.GOOS
	}
	if o.GOARCH == "" {
		o.GOARCH = runtime.GOARCH
	}
	if len(o.Providers) == 0 {
		o.Providers = []Provider{Null, Time}
	}
	return o
}

// Install builds the providers (once per process and platform), lays out a
// mirror under t.TempDir() and returns the CLI config snippet that makes
// terraform and tofu install hashicorp/null and hashicorp/time from it and
// never from the network. It fails the test if they cannot be built.
func Install(t testing.TB) (cliConfig string) {
	t.Helper()
	cfg, err := WriteMirror(t.TempDir(), Options{})
	if err != nil {
		t.Fatalf("testprovider: %v", err)
	}
	return cfg
}

// WriteMirror builds the providers (once per process and platform) and lays
// them out as an unpacked filesystem mirror in dir:
//
//	dir/<host>/hashicorp/<type>/<version>/<os>_<arch>/terraform-provider-<type>_v<version>
//
// for every host in Hosts, provider and version. It returns a CLI config
// snippet (one provider_installation block) that installs those providers
// from dir and everything else directly from its registry.
func WriteMirror(dir string, opts Options) (cliConfig string, err error) {
	opts = opts.withDefaults()
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	var types []string
	for _, p := range opts.Providers {
		types = append(types, p.Type)
		bin := p.Binary
		if bin == "" {
			if bin, err = Build(p.Type, opts.GOOS, opts.GOARCH); err != nil {
				return "", err
			}
		}
		for _, host := range Hosts {
			for _, v := range p.Versions {
				platformDir := filepath.Join(dir, host, Namespace, p.Type, v, opts.GOOS+"_"+opts.GOARCH)
				if err := os.MkdirAll(platformDir, 0o755); err != nil {
					return "", err
				}
				name := "terraform-provider-" + p.Type + "_v" + v
				if opts.GOOS == "windows" {
					name += ".exe"
				}
				if err := linkOrCopy(bin, filepath.Join(platformDir, name)); err != nil {
					return "", err
				}
			}
		}
	}
	return CLIConfig(dir, types...), nil
}

// CLIConfig returns the provider_installation block for a mirror in dir
// holding the given provider types (default null and time).
func CLIConfig(dir string, types ...string) string {
	if len(types) == 0 {
		types = []string{Null.Type, Time.Type}
	}
	var addrs []string
	for _, h := range Hosts {
		for _, typ := range types {
			addrs = append(addrs, strconv.Quote(h+"/"+Namespace+"/"+typ))
		}
	}
	list := "[" + strings.Join(addrs, ", ") + "]"
	return fmt.Sprintf(`
provider_installation {
  filesystem_mirror {
    path    = %s
    include = %s
  }
  direct {
    exclude = %s
  }
}
`, strconv.Quote(filepath.ToSlash(dir)), list, list)
}

// buildable lists the provider types this module has a cmd/ for; Build makes
// all of them in one `go build` (one toolchain start, links in parallel).
var buildable = []string{"null", "time", "local"}

var (
	buildMu   sync.Mutex
	buildDone = map[string]*buildResult{} // by <os>_<arch>
)

type buildResult struct {
	paths map[string]string // by provider type
	err   error
}

// Build compiles the provider of the given type (cmd/terraform-provider-<typ>)
// for goos/goarch (empty means this process's platform) and returns the path
// of the executable. All stand-ins are built together, once per process and
// platform. The binaries are shared by all processes building from the same
// source tree: they are written to temporary names and renamed into place, so
// concurrent test binaries never see a half-written file.
func Build(typ, goos, goarch string) (string, error) {
	if goos == "" {
		goos = runtime.GOOS
	}
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	key := goos + "_" + goarch
	buildMu.Lock()
	r, ok := buildDone[key]
	if !ok {
		r = &buildResult{}
		r.paths, r.err = build(goos, goarch)
		buildDone[key] = r
	}
	buildMu.Unlock()
	if r.err != nil {
		return "", r.err
	}
	p, ok := r.paths[typ]
	if !ok {
		return "", fmt.Errorf("testprovider: no stand-in for provider type %q (have %v)", typ, buildable)
	}
	return p, nil
}

func build(goos, goarch string) (map[string]string, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	goBin, err := goTool()
	if err != nil {
		return nil, err
	}
	// One output directory per source tree, so worktrees of different
	// branches never overwrite each other's binaries.
	sum := sha256.Sum256([]byte(root))
	outDir := filepath.Join(os.TempDir(), "terrace-testprovider-"+hex.EncodeToString(sum[:6]), goos+"_"+goarch)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	tmpDir, err := os.MkdirTemp(outDir, "build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmpDir)

	args := []string{"build", "-o", tmpDir + string(filepath.Separator)}
	for _, typ := range buildable {
		args = append(args, "./cmd/terraform-provider-"+typ)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s (GOOS=%s GOARCH=%s): %v\n%s", strings.Join(args, " "), goos, goarch, err, out.String())
	}
	paths := map[string]string{}
	for _, typ := range buildable {
		name := "terraform-provider-" + typ
		if goos == "windows" {
			name += ".exe"
		}
		final := filepath.Join(outDir, name)
		if err := os.Rename(filepath.Join(tmpDir, name), final); err != nil {
			return nil, err
		}
		paths[typ] = final
	}
	return paths, nil
}

// moduleRoot finds the directory holding this module's go.mod, from the
// location of this source file (so it works from any working directory, as
// long as the source tree is present, which is the case for tests and
// `go run`). A binary built with -trimpath (which CI may use) knows the file only
// by its import path: then it looks from the working directory, which is
// the package's own directory in a test.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("testprovider: cannot locate source file")
	}
	dir := filepath.Dir(file)
	if !filepath.IsAbs(dir) {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("testprovider: %w", err)
		}
		dir = wd
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testprovider: no go.mod above %s (is the source tree present?)", file)
		}
		dir = parent
	}
}

func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	// go test and go run put their own go first on PATH, so this is only
	// reached when the tests run some other way.
	return "", fmt.Errorf("testprovider: the go command is not on PATH (needed to build the providers)")
}

// linkOrCopy places an executable copy of src at dst: a hard link when both
// are on one file system, a copy otherwise. A hard link keeps the inode even
// if src is later replaced by another process's build.
func linkOrCopy(src, dst string) error {
	os.Remove(dst)
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
