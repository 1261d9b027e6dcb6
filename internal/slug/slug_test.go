package slug

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/core"
)

type entry struct {
	name, body, link string
	typ              byte
}

func archive(t testing.TB, entries ...entry) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body)), Linkname: e.link}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			_, _ = tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func TestUnpackRefusesHostileArchives(t *testing.T) {
	cases := map[string]struct {
		entries []entry
		want    string
	}{
		"absolute path":        {[]entry{{name: "/etc/passwd", body: "x"}}, "absolute"},
		"dot-dot":              {[]entry{{name: "a/../../evil.tf", body: "x"}}, "'..'"},
		"symlink escaping":     {[]entry{{name: "l", typ: tar.TypeSymlink, link: "../../etc"}}, "outside"},
		"absolute symlink":     {[]entry{{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"}}, "absolute"},
		"write through a link": {[]entry{{name: "d", typ: tar.TypeSymlink, link: "sub"}, {name: "sub/", typ: tar.TypeDir}, {name: "d/x.tf", body: "x"}}, "symbolic link"},
		"hard link":            {[]entry{{name: "a", body: "x"}, {name: "b", typ: tar.TypeLink, link: "a"}}, "hard link"},
		"device":               {[]entry{{name: "dev", typ: tar.TypeChar}}, "device"},
		"fifo":                 {[]entry{{name: "p", typ: tar.TypeFifo}}, "device or FIFO"},
		"too big":              {[]entry{{name: "a", body: strings.Repeat("x", 600)}, {name: "b", body: strings.Repeat("x", 600)}}, "limit"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "dst")
			os.Mkdir(dst, 0o755)
			err := Unpack(bytes.NewReader(archive(t, c.entries...)), dst, Limits{MaxBytes: 1000})
			if core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Unpack = %v; want an invalid-archive error mentioning %q", err, c.want)
			}
			// Nothing may appear outside dst.
			ents, _ := os.ReadDir(parent)
			if len(ents) != 1 {
				t.Fatalf("Unpack wrote outside the destination: %v", ents)
			}
		})
	}
}

func TestUnpackRefusesGarbage(t *testing.T) {
	if err := Unpack(strings.NewReader("not gzip"), t.TempDir(), Limits{}); core.KindOf(err) != core.KindInvalid {
		t.Fatalf("garbage: %v", err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.Write([]byte("not a tar stream, but long enough to need a header block......"))
	gz.Close()
	if err := Unpack(&buf, t.TempDir(), Limits{}); core.KindOf(err) != core.KindInvalid {
		t.Fatalf("gzip of garbage: %v", err)
	}
}

func TestPackUnpackRoundTrip(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		"main.tf":                      `resource "terraform_data" "x" {}`,
		"modules/net/main.tf":          `output "id" { value = "x" }`,
		".terraform/modules/m/main.tf": `# fetched module`,
	}
	for name, body := range files {
		p := filepath.Join(src, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
	}
	os.MkdirAll(filepath.Join(src, ".terraform/providers"), 0o755)
	os.WriteFile(filepath.Join(src, ".terraform/providers/big"), []byte("provider binary"), 0o755)
	os.Symlink("modules/net", filepath.Join(src, "net"))
	os.Symlink("/etc", filepath.Join(src, "escape"))

	data, err := Pack(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := Unpack(bytes.NewReader(data), dst, Limits{}); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != body {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, ".terraform/providers/big")); err == nil {
		t.Error("provider binaries were packed")
	}
	if l, err := os.Readlink(filepath.Join(dst, "net")); err != nil || l != "modules/net" {
		t.Errorf("inner symlink: %q %v", l, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "escape")); err == nil {
		t.Error("a symlink leaving the folder was packed")
	}
}

// TestPackLimit: a folder whose archive is over the limit is refused
// while it is packed; one under it packs as Pack does; a submodule's .git
// file and a .git folder are left out.
func TestPackLimit(t *testing.T) {
	src := t.TempDir()
	big := make([]byte, 256<<10)
	if _, err := rand.Read(big); err != nil { // incompressible
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"main.tf": []byte("# x\n"), "blob.bin": big, "lib/.git": []byte("gitdir: ../.git/modules/lib\n"),
		"lib/lib.tf": []byte("# lib\n"), ".git/HEAD": []byte("ref: refs/heads/main\n")} {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := PackLimit(src, 64<<10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("PackLimit over the limit: %v, want ErrTooLarge", err)
	}
	data, err := PackLimit(src, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := Unpack(bytes.NewReader(data), dst, Limits{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lib/.git", ".git"} {
		if _, err := os.Lstat(filepath.Join(dst, name)); err == nil {
			t.Errorf("%s was packed", name)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dst, "lib/lib.tf")); err != nil || string(b) != "# lib\n" {
		t.Errorf("lib/lib.tf: %q, %v", b, err)
	}
}

func FuzzUnpack(f *testing.F) {
	f.Add(archive(f, entry{name: "main.tf", body: "x"}))
	f.Add(archive(f, entry{name: "../x", body: "x"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "dst")
		os.Mkdir(dst, 0o755)
		_ = Unpack(bytes.NewReader(data), dst, Limits{MaxBytes: 1 << 20})
		ents, _ := os.ReadDir(parent)
		if len(ents) != 1 {
			t.Fatalf("Unpack wrote outside the destination: %v", ents)
		}
	})
}
