// Package testprovider builds Terrace's stand-in hashicorp/null provider
// (cmd/terraform-provider-null) and lays it out as a filesystem mirror, so
// terraform and OpenTofu can run configurations that use null_resource on a
// machine without internet access.
//
// Tests call Install(t) and append the returned text to the CLI config file
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

const (
	// Version is the release the provider reports and is mirrored as.
	Version = "3.2.4"
	// Namespace and Type name the provider: hashicorp/null.
	Namespace = "hashicorp"
	Type      = "null"
	// Package is the Go package of the provider binary.
	Package = "github.com/terracehq/terrace/cmd/terraform-provider-null"
)

// Hosts are the registry hostnames the mirror answers for. Terraform expands
// source "hashicorp/null" (and an implicit null_resource) to
// registry.terraform.io; OpenTofu expands it to registry.opentofu.org.
var Hosts = []string{"registry.terraform.io", "registry.opentofu.org"}

// Options tune WriteMirror. The zero value mirrors Version for the platform
// this process runs on.
type Options struct {
	// GOOS and GOARCH select the platform to build for and the
	// <os>_<arch> directory of the mirror; they default to runtime.GOOS
	// and runtime.GOARCH (terraform looks up its own platform).
	GOOS, GOARCH string
	// Versions lists the version directories to lay out (all hold the same
	// binary; terraform does not check the version a provider reports).
	// Default: []string{Version}. Add "3.1.1" for configurations that pin it,
	// such as go-tfe's stack fixture.
	Versions []string
	// Binary, if set, is a provider executable built beforehand (for
	// GOOS/GOARCH); WriteMirror then lays it out instead of building.
	Binary string
}

func (o Options) withDefaults() Options {
	if o.GOOS == "" {
		o.GOOS = runtime.GOOS
	}
	if o.GOARCH == "" {
		o.GOARCH = runtime.GOARCH
	}
	if len(o.Versions) == 0 {
		o.Versions = []string{Version}
	}
	return o
}

// Install builds the provider (once per process and platform), lays out a
// mirror under t.TempDir() and returns the CLI config snippet that makes
// terraform and tofu install hashicorp/null from it and never from the
// network. It fails the test if the provider cannot be built.
func Install(t testing.TB) (cliConfig string) {
	t.Helper()
	cfg, err := WriteMirror(t.TempDir(), Options{})
	if err != nil {
		t.Fatalf("testprovider: %v", err)
	}
	return cfg
}

// WriteMirror builds the provider (once per process and platform) and lays it
// out as an unpacked filesystem mirror in dir:
//
//	dir/<host>/hashicorp/null/<version>/<os>_<arch>/terraform-provider-null_v<version>
//
// for every host in Hosts and every version in opts.Versions. It returns a CLI
// config snippet (one provider_installation block) that installs
// hashicorp/null from dir and everything else directly from its registry.
func WriteMirror(dir string, opts Options) (cliConfig string, err error) {
	opts = opts.withDefaults()
	bin := opts.Binary
	if bin == "" {
		if bin, err = Build(opts.GOOS, opts.GOARCH); err != nil {
			return "", err
		}
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for _, host := range Hosts {
		for _, v := range opts.Versions {
			platformDir := filepath.Join(dir, host, Namespace, Type, v, opts.GOOS+"_"+opts.GOARCH)
			if err := os.MkdirAll(platformDir, 0o755); err != nil {
				return "", err
			}
			name := "terraform-provider-" + Type + "_v" + v
			if opts.GOOS == "windows" {
				name += ".exe"
			}
			if err := linkOrCopy(bin, filepath.Join(platformDir, name)); err != nil {
				return "", err
			}
		}
	}
	return CLIConfig(dir), nil
}

// CLIConfig returns the provider_installation block for a mirror in dir
// written by WriteMirror.
func CLIConfig(dir string) string {
	var addrs []string
	for _, h := range Hosts {
		addrs = append(addrs, strconv.Quote(h+"/"+Namespace+"/"+Type))
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

var (
	buildMu   sync.Mutex
	buildDone = map[string]*buildResult{}
)

type buildResult struct {
	path string
	err  error
}

// Build compiles the provider for goos/goarch (empty means this process's
// platform) once per process and returns the path of the executable. The
// binary is shared by all processes building from the same source tree: it
// is written to a temporary name and renamed into place, so concurrent test
// binaries never see a half-written file.
func Build(goos, goarch string) (string, error) {
	if goos == "" {
		goos = runtime.GOOS
	}
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	key := goos + "_" + goarch
	buildMu.Lock()
	defer buildMu.Unlock()
	if r, ok := buildDone[key]; ok {
		return r.path, r.err
	}
	path, err := build(goos, goarch)
	buildDone[key] = &buildResult{path, err}
	return path, err
}

func build(goos, goarch string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	goBin, err := goTool()
	if err != nil {
		return "", err
	}
	// One output directory per source tree, so worktrees of different
	// branches never overwrite each other's binary.
	sum := sha256.Sum256([]byte(root))
	outDir := filepath.Join(os.TempDir(), "terrace-testprovider-"+hex.EncodeToString(sum[:6]), goos+"_"+goarch)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(outDir, "terraform-provider-"+Type)
	if goos == "windows" {
		final += ".exe"
	}
	tmp := fmt.Sprintf("%s.%d.tmp", final, os.Getpid())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", tmp, Package)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build %s for %s/%s: %v\n%s", Package, goos, goarch, err, out.String())
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return final, nil
}

// moduleRoot finds the directory holding this module's go.mod, from the
// location of this source file (so it works from any working directory, as
// long as the source tree is present, which is the case for tests and
// `go run`).
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("testprovider: cannot locate source file")
	}
	dir := filepath.Dir(file)
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
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("testprovider: the go command is not on PATH (needed to build the provider)")
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
