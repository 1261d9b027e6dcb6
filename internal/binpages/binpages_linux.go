package binpages

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Release releases the pages of the running executable's read-only
// mappings (see the package comment).
func Release() (Released, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return Released{}, fmt.Errorf("finding the executable: %w", err)
	}
	// /proc/self/exe opens the file this process runs, even once an
	// upgrade has put another at its path.
	return release(exe, "/proc/self/exe")
}

// release releases the read-only private mappings of the file at path
// (as /proc/self/maps names it) that hold no private copies of pages,
// then drops the file's pages that nothing maps from the page cache
// (opening it as file).
func release(path, file string) (Released, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return Released{}, err
	}
	ms, err := mappingsOf(f, path)
	f.Close()
	if err != nil {
		return Released{}, fmt.Errorf("reading /proc/self/smaps: %w", err)
	}
	var r Released
	for _, m := range ms {
		// A page written through a private mapping (COW) is the process's
		// own copy: unmapping it would bring back the file's bytes. A
		// read-only mapping gets such pages only before it was made
		// read-only or through ptrace, so one seen without them has none.
		if m.anonymous > 0 {
			r.Skipped++
			continue
		}
		length := uintptr(m.end - m.start)
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), length, unix.MADV_DONTNEED); e != 0 {
			return r, fmt.Errorf("madvise(MADV_DONTNEED) %x-%x: %w", m.start, m.end, e)
		}
		if !m.executable {
			// Read a page at a time from now on: no read-ahead, so the
			// fault-around finds no neighbours in the page cache to map.
			if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), length, unix.MADV_RANDOM); e != 0 {
				return r, fmt.Errorf("madvise(MADV_RANDOM) %x-%x: %w", m.start, m.end, e)
			}
		}
		r.Mappings++
		r.Bytes += m.rss
	}
	exe, err := os.Open(file)
	if err != nil {
		return r, fmt.Errorf("opening %s to drop its cached pages: %w", file, err)
	}
	defer exe.Close()
	// Pages still mapped (touched again since, or mapped by another
	// process) and pages not yet written back stay.
	if err := unix.Fadvise(int(exe.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return r, fmt.Errorf("fadvise(POSIX_FADV_DONTNEED) %s: %w", file, err)
	}
	r.Evicted = true
	return r, nil
}

// mapping is one entry of /proc/self/smaps.
type mapping struct {
	start, end     uint64
	rss, anonymous int64
	executable     bool
}

// mappingsOf reads smaps and returns the private, non-writable mappings of
// the file at path.
func mappingsOf(r io.Reader, path string) ([]mapping, error) {
	var out []mapping
	var cur *mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m, perms, file, ok := header(line); ok {
			cur = nil
			// perms is rwxp: only private mappings that cannot be written.
			if file == path && len(perms) == 4 && perms[1] != 'w' && perms[3] == 'p' {
				m.executable = perms[2] == 'x'
				out = append(out, m)
				cur = &out[len(out)-1]
			}
			continue
		}
		if cur == nil {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch key {
		case "Rss", "Anonymous":
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", line, err)
			}
			if key == "Rss" {
				cur.rss = kb << 10
			} else {
				cur.anonymous = kb << 10
			}
		}
	}
	return out, sc.Err()
}

// header parses a mapping's first line in smaps:
//
//	00400000-01a3c000 r-xp 00000000 fd:01 1234    /usr/local/bin/terrace
func header(line string) (m mapping, perms, file string, ok bool) {
	fields := strings.Fields(line)
	if len(fields) < 5 {
		return m, "", "", false
	}
	lo, hi, found := strings.Cut(fields[0], "-")
	if !found {
		return m, "", "", false
	}
	var err error
	if m.start, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return m, "", "", false
	}
	if m.end, err = strconv.ParseUint(hi, 16, 64); err != nil {
		return m, "", "", false
	}
	if len(fields) >= 6 {
		// The path is the rest of the line after the inode: it may hold
		// spaces, and " (deleted)" once the file was replaced (as
		// /proc/self/exe then reads too).
		rest := line
		for range 5 {
			rest = strings.TrimLeft(rest, " ")
			i := strings.IndexByte(rest, ' ')
			rest = rest[i+1:]
		}
		file = strings.TrimLeft(rest, " ")
	}
	return m, fields[1], file, true
}
