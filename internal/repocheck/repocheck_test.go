package repocheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoMachinePaths fails when a tracked file names a path that only the
// machine it was written on has (the trap that once made a fresh clone
// fail `make test` while CI, on the author's machine, passed).
func TestNoMachinePaths(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files, err := TrackedFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found only %d files under %s: is this the repository root?", len(files), root)
	}
	found, err := MachinePaths(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s\n\tnames a path on one machine only: put fixtures in testdata/, take go-tfe's files from the module cache, or build paths at run time (t.TempDir, os.MkdirTemp)", f)
	}
}

// TestMachinePathsCatches checks the guard itself on files written here.
func TestMachinePathsCatches(t *testing.T) {
	root := t.TempDir()
	// The machine folders are spelled in pieces so that this file, which
	// the guard also reads, names none of them.
	work, home, rootDir, tmp := "/wo"+"rk/", "/ho"+"me/", "/ro"+"ot/", "/t"+"mp/"
	files := map[string]string{
		"bad_test.go":    "package x\n\nvar fixture = \"" + work + "x\"\n",
		"home.sh":        "cp ~/a b\ncat " + home + "dev/notes\n",
		"root.go":        "// see " + rootDir + "go/pkg/mod/x\n",
		"tmp.mk":         "OUT = " + tmp + "terrace-build\n",
		"good_test.go":   "package x\n\nvar dir = filepath.Join(os.TempDir(), \"x\")\nvar rel = \"testdata" + work + "x\"\nvar url = \"https://example.com" + work + "x\"\nvar tmp = \"" + tmp + "\" + name\n",
		"docs/readme.md": "Run `D=$(mktemp -d)` then $D/terrace.\n",
		"go.sum":         "example.com" + work + "x v1.0.0 h1:abc\n",
	}
	var names []string
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	listed, err := TrackedFiles(root)
	if err != nil || len(listed) != len(files) {
		t.Fatalf("TrackedFiles outside git: %v %v", listed, err)
	}
	found, err := MachinePaths(root, names)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range found {
		got[f.File] = true
	}
	for _, want := range []string{"bad_test.go", "home.sh", "root.go", "tmp.mk"} {
		if !got[want] {
			t.Errorf("the guard missed the machine path in %s: %q", want, files[want])
		}
	}
	for _, clean := range []string{"good_test.go", "docs/readme.md", "go.sum"} {
		if got[clean] {
			t.Errorf("the guard flagged %s, which names no machine path: %v", clean, found)
		}
	}
	if len(found) != 4 || !strings.Contains(found[0].String(), ":") {
		t.Errorf("findings: %v", found)
	}
}

// TestNoLargeBoundedRepetitions fails when the code compiles a regular
// expression with a repetition such as `{0,254}`: Go expands it into one
// copy per count, held for the process's life (docs/design/memory.md).
func TestNoLargeBoundedRepetitions(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files, err := TrackedFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	found, err := BoundedRepetitions(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s\n\ta repetition past %d: write it with * or + and check the length (core.Pattern)", f, MaxRepeat)
	}
}

// TestBoundedRepetitionsCatches checks the guard itself.
func TestBoundedRepetitionsCatches(t *testing.T) {
	root := t.TempDir()
	src := "package x\n\nimport \"regexp\"\n\nvar (\n" +
		"\tbig   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)\n" +
		"\texact = regexp.MustCompile(\"^[0-9a-f]{64}$\")\n" +
		"\tsmall = regexp.MustCompile(`^[0-9]{1,3}(\\.[0-9]{1,3})?$`)\n" +
		"\tfree  = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)\n)\n"
	if err := os.WriteFile(filepath.Join(root, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "x_test.go"), []byte(strings.Replace(src, "package x", "package x\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	found, err := BoundedRepetitions(root, []string{"x.go", "x_test.go", "README.md"})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 2 || found[0].Line != 6 || found[1].Line != 7 {
		t.Fatalf("found %v, want lines 6 and 7 of x.go only", found)
	}
}
