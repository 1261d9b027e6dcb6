// Package repocheck holds checks on the repository's own files: that a
// fresh clone works on a fresh machine (no path only one machine has), and
// that the code keeps no costly value for the life of the process (no large
// bounded repetition in a regular expression). Its tests run them over
// every tracked file, so `make test` fails first.
package repocheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// machinePath matches an absolute path into a machine's home or work
// folders, or a fixed name under /tmp: a file that exists only where the
// line was written. "/tmp/" alone (a prefix built at run time) is fine.
// (The folder names are joined at run time so that this file does not name
// them itself.)
var machinePath = regexp.MustCompile(`(^|[^A-Za-z0-9_.~$/-])/(` + strings.Join([]string{
	"ro" + "ot/",
	"ho" + "me/[A-Za-z0-9_.-]+",
	"wo" + "rk/",
	"t" + "mp/[A-Za-z0-9_.-]",
}, "|") + ")")

// Finding is one line that names a machine-local path.
type Finding struct {
	File string // relative to the scanned root
	Line int
	Text string
}

func (f Finding) String() string { return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.Text) }

// TrackedFiles lists the files git tracks under root, or, outside a git
// checkout, every regular file below it (skipping .git and .cache).
func TrackedFiles(root string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(root, ".git")); err == nil {
		cmd := exec.Command("git", "-C", root, "ls-files", "-z")
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git ls-files in %s: %w", root, err)
		}
		var files []string
		for _, f := range bytes.Split(out, []byte{0}) {
			if len(f) > 0 {
				files = append(files, string(f))
			}
		}
		return files, nil
	}
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".cache") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	return files, err
}

// MachinePaths returns every line of the files (relative to root) that
// names a machine-local path. Binary files and go.sum are skipped.
func MachinePaths(root string, files []string) ([]Finding, error) {
	var out []Finding
	for _, name := range files {
		if filepath.Base(name) == "go.sum" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			if os.IsNotExist(err) { // deleted in the work tree, not yet committed
				continue
			}
			return nil, err
		}
		if bytes.IndexByte(data, 0) >= 0 {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
		for n := 1; sc.Scan(); n++ {
			if line := sc.Text(); machinePath.MatchString(line) {
				out = append(out, Finding{File: name, Line: n, Text: strings.TrimSpace(line)})
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	return out, nil
}
