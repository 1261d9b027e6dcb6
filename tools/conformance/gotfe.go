package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const (
	goTFEModule  = "github.com/hashicorp/go-tfe"
	goTFEVersion = "v1.109.0"
)

// GoTFE is a built go-tfe test binary and the source folder it must run in
// (its tests read test-fixtures/ relative to the working directory).
type GoTFE struct {
	Binary string
	SrcDir string
}

// obtainGoTFE returns go-tfe's test binary, building it when the cache has
// none for this go-tfe and Go version. The source comes from the Go module
// proxy (go mod download) and is copied into the cache, since the module
// cache is read-only; nothing of go-tfe is kept in the repository.
func obtainGoTFE(ctx context.Context, repo, cacheDir string, logf func(string, ...any)) (*GoTFE, error) {
	var mod struct{ Path, Version, Dir, Sum, Error string }
	out, err := goCmd(ctx, repo, nil, "mod", "download", "-json", goTFEModule+"@"+goTFEVersion)
	if jerr := json.Unmarshal(out, &mod); jerr != nil || err != nil || mod.Error != "" || mod.Dir == "" {
		return nil, fmt.Errorf("downloading %s@%s through the Go module proxy: %v %s\n%s", goTFEModule, goTFEVersion, err, mod.Error, out)
	}
	goVersion, err := goCmd(ctx, repo, nil, "env", "GOVERSION")
	if err != nil {
		return nil, fmt.Errorf("go env GOVERSION: %v: %s", err, goVersion)
	}
	stamp := fmt.Sprintf("%s %s %s\n%s\n", goTFEModule, goTFEVersion, mod.Sum, strings.TrimSpace(string(goVersion)))
	dir := filepath.Join(cacheDir, "go-tfe-"+goTFEVersion)
	g := &GoTFE{Binary: filepath.Join(dir, "gotfe.test"), SrcDir: filepath.Join(dir, "src")}
	if b, err := os.ReadFile(filepath.Join(dir, "stamp")); err == nil && string(b) == stamp {
		if _, err := os.Stat(g.Binary); err == nil {
			return g, nil
		}
	}
	logf("building go-tfe %s's test binary into %s", goTFEVersion, dir)
	start := time.Now()
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(cacheDir, "go-tfe-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := copyTree(mod.Dir, filepath.Join(tmp, "src")); err != nil {
		return nil, fmt.Errorf("copying go-tfe's source: %w", err)
	}
	// -mod=mod lets go fill in any go.sum line the module zip lacks.
	if out, err := goCmd(ctx, filepath.Join(tmp, "src"), []string{"GOFLAGS=-mod=mod", "GOWORK=off"},
		"test", "-c", "-o", filepath.Join(tmp, "gotfe.test"), "."); err != nil {
		return nil, fmt.Errorf("building go-tfe's test binary: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, "stamp"), []byte(stamp), 0o644); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(dir, "stamp")); err == nil && string(b) == stamp {
		return g, nil // another run finished the same build first; keep its copy, which may be in use
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("moving the build into place: %w", err)
	}
	logf("built in %s", time.Since(start).Round(100*time.Millisecond))
	return g, nil
}

// List returns the binary's top-level test names.
func (g *GoTFE) List(ctx context.Context) ([]string, error) {
	cmd := exec.CommandContext(ctx, g.Binary, "-test.list", ".")
	cmd.Dir = g.SrcDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s -test.list: %v\n%s", g.Binary, err, stderr.Bytes())
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "Test") {
			names = append(names, l)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("go-tfe's test binary lists no tests")
	}
	return names, nil
}

// goCmd runs the go command in dir and returns its stdout (its combined
// output when it fails).
func goCmd(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return append(out, stderr.Bytes()...), err
	}
	return out, nil
}

// copyTree copies regular files and folders (the module cache holds
// nothing else), making them writable.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm()|0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
