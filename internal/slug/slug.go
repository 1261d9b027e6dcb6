// Package slug packs and unpacks configuration archives ("slugs"): the
// gzipped tarballs that the terraform CLI uploads as configuration versions
// and that the registry stores as module versions.
//
// Archives come from users and are untrusted. Unpack refuses absolute
// paths, ".." components, links that point outside the destination,
// hard links, device files and FIFOs, and archives that unpack to more than
// a size or file-count limit. It writes nothing outside the destination.
package slug

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/terracehq/terrace/internal/core"
)

// Limits bound what Unpack accepts.
type Limits struct {
	// MaxBytes is the most the archive may unpack to. Defaults to 100 MB.
	MaxBytes int64
	// MaxFiles is the most entries it may hold. Defaults to 100,000.
	MaxFiles int
}

// DefaultMaxBytes is the default unpacked size limit.
const DefaultMaxBytes = 100 << 20

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = 100_000
	}
	return l
}

// Unpack extracts the gzipped tar stream r into dst (which must exist).
// Errors are core.KindInvalid with a message naming the offending entry.
func Unpack(r io.Reader, dst string, lim Limits) error {
	lim = lim.withDefaults()
	root, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return core.Invalid("archive is not gzip-compressed: %v", err)
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	var total int64
	files := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return core.Invalid("archive is not a valid tar stream: %v", err)
		}
		files++
		if files > lim.MaxFiles {
			return core.Invalid("archive holds more than %d entries", lim.MaxFiles)
		}
		name, err := cleanName(h.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue // the archive root itself
		}
		target := filepath.Join(root, filepath.FromSlash(name))
		if err := checkParents(root, target); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg, 0: // 0 is the pre-POSIX spelling of a regular file (tar.TypeRegA)
			if h.Size < 0 || total+h.Size > lim.MaxBytes {
				return core.Invalid("archive unpacks to more than the limit of %d bytes", lim.MaxBytes)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return fmt.Errorf("writing %s: %w", name, err)
			}
			n, err := io.Copy(f, io.LimitReader(tr, lim.MaxBytes-total+1))
			f.Close()
			if err != nil {
				return core.Invalid("reading %s from the archive: %v", name, err)
			}
			total += n
			if total > lim.MaxBytes {
				return core.Invalid("archive unpacks to more than the limit of %d bytes", lim.MaxBytes)
			}
		case tar.TypeSymlink:
			if err := checkLink(root, target, h.Linkname); err != nil {
				return core.Invalid("archive entry %q: %v", h.Name, err)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return fmt.Errorf("linking %s: %w", name, err)
			}
		case tar.TypeLink:
			return core.Invalid("archive entry %q is a hard link, which is not allowed", h.Name)
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			return core.Invalid("archive entry %q is a device or FIFO, which is not allowed", h.Name)
		case tar.TypeXGlobalHeader, tar.TypeXHeader:
			continue
		default:
			return core.Invalid("archive entry %q has an unsupported type %q", h.Name, string(h.Typeflag))
		}
	}
}

// cleanName validates an entry name and returns it cleaned and relative.
func cleanName(name string) (string, error) {
	if strings.ContainsRune(name, 0) {
		return "", core.Invalid("archive entry name contains a NUL byte")
	}
	n := strings.ReplaceAll(name, `\`, "/")
	if strings.HasPrefix(n, "/") || (len(n) > 1 && n[1] == ':') {
		return "", core.Invalid("archive entry %q has an absolute path", name)
	}
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "", core.Invalid("archive entry %q escapes the archive with '..'", name)
		}
	}
	c := path.Clean(n)
	if c == "." {
		return "", nil
	}
	return c, nil
}

// checkParents refuses to write through a symlink created by an earlier
// entry: every existing parent of target must be a real directory inside root.
func checkParents(root, target string) error {
	rel, err := filepath.Rel(root, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return core.Invalid("archive entry %q escapes the archive", target)
	}
	dir := root
	parts := strings.Split(filepath.Dir(rel), string(filepath.Separator))
	for _, p := range parts {
		if p == "." || p == "" {
			continue
		}
		dir = filepath.Join(dir, p)
		fi, err := os.Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return core.Invalid("archive entry %q is written through a symbolic link", rel)
		}
	}
	// An existing symlink at the target itself would redirect the write.
	if fi, err := os.Lstat(target); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return core.Invalid("archive entry %q would overwrite a symbolic link", rel)
	}
	return nil
}

// checkLink refuses link targets that are absolute or resolve outside root.
func checkLink(root, link, target string) error {
	if target == "" {
		return errors.New("empty link target")
	}
	if filepath.IsAbs(target) || strings.HasPrefix(target, "/") {
		return fmt.Errorf("link target %q is absolute", target)
	}
	resolved := filepath.Join(filepath.Dir(link), filepath.FromSlash(target))
	rel, err := filepath.Rel(root, resolved)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("link target %q points outside the archive", target)
	}
	return nil
}

// Pack archives the directory dir (regular files, directories and
// symlinks that stay inside it), skipping .git folders and files (a
// submodule's) and the root's .terraform folder except .terraform/modules.
func Pack(dir string) ([]byte, error) {
	return PackLimit(dir, 0)
}

// ErrTooLarge is PackLimit's refusal of a folder whose archive is over
// its limit.
var ErrTooLarge = errors.New("the archive is over its size limit")

// PackLimit is Pack that stops, with ErrTooLarge, as soon as the archive
// grows over max bytes (0: no limit), so that a large folder is never
// held in memory whole.
func PackLimit(dir string, max int64) ([]byte, error) {
	var buf bytes.Buffer
	var out io.Writer = &buf
	if max > 0 {
		out = &capped{b: &buf, n: max}
	}
	gz := gzip.NewWriter(out)
	tw := tar.NewWriter(gz)
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.Name() == ".git" && !d.IsDir() {
			return nil // a submodule's or worktree's pointer to its repository
		}
		if d.IsDir() && (d.Name() == ".git" || (d.Name() == ".terraform" && !strings.Contains(rel, "/"))) {
			if d.Name() == ".terraform" {
				if _, err := os.Stat(filepath.Join(p, "modules")); err == nil {
					if err := addTree(tw, root, filepath.Join(p, "modules")); err != nil {
						return err
					}
				}
			}
			return filepath.SkipDir
		}
		return addEntry(tw, root, p, rel, d)
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func addTree(tw *tar.Writer, root, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		return addEntry(tw, root, p, filepath.ToSlash(rel), d)
	})
}

func addEntry(tw *tar.Writer, root, p, rel string, d fs.DirEntry) error {
	info, err := os.Lstat(p)
	if err != nil {
		return err
	}
	link := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(p); err != nil {
			return err
		}
		if checkLink(root, p, link) != nil {
			return nil // links leaving the folder are not packed
		}
	} else if !info.Mode().IsRegular() && !info.IsDir() {
		return nil
	}
	h, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return err
	}
	h.Name = rel
	if info.IsDir() {
		h.Name += "/"
	}
	h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if info.Mode().IsRegular() {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	}
	return nil
}

// capped is a buffer that refuses writes past n bytes.
type capped struct {
	b *bytes.Buffer
	n int64
}

func (c *capped) Write(p []byte) (int, error) {
	if int64(c.b.Len()+len(p)) > c.n {
		return 0, ErrTooLarge
	}
	return c.b.Write(p)
}
