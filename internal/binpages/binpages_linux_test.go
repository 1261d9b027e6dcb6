package binpages

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sink keeps the compiler from dropping the reads that touch pages.
var sink byte

// mmapFile maps the whole file at path, unmapped at the test's end.
func mmapFile(t *testing.T, path string, prot, flags int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), prot, flags)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

// mapFile maps the file at path privately and reads every page of it.
func mapFile(t *testing.T, path string, prot int) []byte {
	t.Helper()
	b := mmapFile(t, path, prot, unix.MAP_PRIVATE)
	for i := 0; i < len(b); i += os.Getpagesize() {
		sink += b[i]
	}
	return b
}

// residentOf is the resident bytes of this process's mappings of path.
func residentOf(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := mappingsOf(f, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatalf("no read-only mapping of %s in /proc/self/smaps", path)
	}
	var n int64
	for _, m := range ms {
		n += m.rss
	}
	return n
}

// writeFile writes a file of size bytes c, on the disk (synced, as an
// installed binary is: the page cache drops only pages written back).
func writeFile(t *testing.T, name string, size int, c byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(bytes.Repeat([]byte{c}, size)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return path
}

// cachedPages is how many of the file's pages are in the page cache
// (mincore of another mapping, which touches none).
func cachedPages(t *testing.T, path string) int {
	t.Helper()
	b := mmapFile(t, path, unix.PROT_READ, unix.MAP_SHARED)
	vec := make([]byte, (len(b)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestReleaseUnmapsCleanPages: a read-only private mapping's pages leave
// the process's resident memory and the page cache, and come back,
// unchanged, when read: a page of data at a time, where the kernel would
// otherwise have mapped the 64 kB around it (fault-around), as it does for
// code.
func TestReleaseUnmapsCleanPages(t *testing.T) {
	t.Parallel()
	page := os.Getpagesize()
	size := 64 * page
	for _, c := range []struct {
		name string
		prot int
		// most is the most pages one read may bring back.
		most int
	}{
		{"clean data", unix.PROT_READ, 1}, // a space: smaps' path is the rest of the line
		// Code: the page and the fault-around (64 kB by default), not the
		// whole mapping (the bound this test had before data was read a
		// page at a time).
		{"clean code", unix.PROT_READ | unix.PROT_EXEC, 32},
	} {
		path := writeFile(t, c.name, size, 'A')
		b := mapFile(t, path, c.prot)
		if got := residentOf(t, path); got != int64(size) {
			t.Fatalf("%s before: %d bytes resident, want all %d", c.name, got, size)
		}
		r, err := release(path, path)
		if err != nil {
			t.Fatal(err)
		}
		if r.Mappings != 1 || r.Bytes != int64(size) || r.Skipped != 0 || !r.Evicted {
			t.Fatalf("%s: released %+v, want 1 mapping of %d bytes, evicted", c.name, r, size)
		}
		if got := residentOf(t, path); got != 0 {
			t.Fatalf("%s after: %d bytes resident, want 0", c.name, got)
		}
		if n := cachedPages(t, path); n != 0 {
			t.Fatalf("%s after: %d pages of the file in the page cache, want none", c.name, n)
		}
		sink += b[5*page]
		if got := residentOf(t, path); got < int64(page) || got > int64(c.most*page) {
			t.Errorf("%s: one page read after the release: %d bytes resident, want that page and at most %d", c.name, got, c.most*page)
		}
		if !bytes.Equal(b, bytes.Repeat([]byte{'A'}, size)) {
			t.Fatalf("%s: the pages read after the release differ from the file", c.name)
		}
	}
}

// TestReleaseKeepsPrivateCopies: a mapping made read-only after pages of
// it were written (as a relocated segment is) keeps them: unmapping them
// would bring back the file's bytes in their place.
func TestReleaseKeepsPrivateCopies(t *testing.T) {
	t.Parallel()
	size := 16 * os.Getpagesize()
	path := writeFile(t, "relocated", size, 'A')
	b := mapFile(t, path, unix.PROT_READ|unix.PROT_WRITE)
	b[0] = 'B'
	if err := unix.Mprotect(b, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	r, err := release(path, path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Mappings != 0 || r.Skipped != 1 {
		t.Errorf("released %+v, want the mapping skipped", r)
	}
	if b[0] != 'B' {
		t.Fatalf("the process's own copy of a page was lost: %q, want 'B'", b[0])
	}
}

// TestReleaseTheExecutable: the running test binary's pages, which its
// start-up made resident, are given back, and the code runs on. Not
// parallel: the other tests' code would map pages while it measures (Go
// runs the parallel tests after it).
func TestReleaseTheExecutable(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	before := residentOf(t, exe)
	r, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := residentOf(t, exe)
	t.Logf("released %+v: %d kB resident before, %d kB after", r, before>>10, after>>10)
	if r.Mappings == 0 || r.Bytes == 0 {
		t.Fatalf("released %+v, want the executable's mappings", r)
	}
	// The code run since (reading smaps) brings some of them back, with
	// the pages around each: in a binary this small, more than half.
	if r.Bytes < before*9/10 || after >= before {
		t.Errorf("the executable's resident pages went from %d kB to %d kB, %d kB released: want nearly all released and fewer back", before>>10, after>>10, r.Bytes>>10)
	}
}

// TestMappingsOf reads the mappings smaps lists for a path: private and
// read-only only, the path as the rest of the header line, and which of
// them hold code.
func TestMappingsOf(t *testing.T) {
	t.Parallel()
	smaps := `00400000-00c00000 r-xp 00000000 fd:01 42                                 /opt/my tools/terrace (deleted)
Size:               8192 kB
Rss:                6144 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
00c00000-01000000 r--p 00800000 fd:01 42                                 /opt/my tools/terrace (deleted)
Rss:                 100 kB
Anonymous:             8 kB
01000000-01100000 rw-p 00c00000 fd:01 42                                 /opt/my tools/terrace (deleted)
Rss:                  12 kB
Anonymous:            12 kB
01100000-01200000 r--s 00000000 fd:01 43                                 /opt/my tools/terrace (deleted)
Rss:                  50 kB
Anonymous:             0 kB
7f0000000000-7f0000001000 r--p 00000000 00:00 0
Rss:                   4 kB
Anonymous:             4 kB
`
	ms, err := mappingsOf(strings.NewReader(smaps), "/opt/my tools/terrace (deleted)")
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{
		{start: 0x400000, end: 0xc00000, rss: 6144 << 10, executable: true},
		{start: 0xc00000, end: 0x1000000, rss: 100 << 10, anonymous: 8 << 10},
	}
	if len(ms) != len(want) {
		t.Fatalf("got %+v, want %+v", ms, want)
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("mapping %d: %+v, want %+v", i, ms[i], want[i])
		}
	}
}
