// Command rssmap says which parts of a running Go binary are resident:
// for every page of the binary's file mappings that /proc/PID/pagemap
// marks present, it finds the ELF symbols on it and adds the resident
// bytes of each symbol to its package, then prints the resident KB per
// package for the text (code) and rodata mappings, the resident KB per
// section, and the process's RssAnon/RssFile from /proc/PID/status.
//
// The binary's pages are file-backed: the kernel maps them on a fault
// together with their neighbours (fault-around, 64 KB), so a package whose
// code runs once at start (an init) keeps the pages around it resident.
// The symbol table must be present (go build without -ldflags=-s).
//
//	go run ./tools/rssmap -pid $(pgrep -n terrace)            # packages by module
//	go run ./tools/rssmap -pid PID -depth 0 -top 60           # full package paths
//
// Reading another process's pagemap needs the same user (or root).
package main

import (
	"debug/elf"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const pageSize = 4096

func main() {
	pid := flag.Int("pid", 0, "process to inspect")
	bin := flag.String("bin", "", "the process's binary (default /proc/PID/exe)")
	depth := flag.Int("depth", 3, "group packages by this many leading path elements (0: full package path)")
	top := flag.Int("top", 40, "print this many groups, biggest first")
	flag.Parse()
	if *pid == 0 {
		fmt.Fprintln(os.Stderr, "rssmap: -pid is required")
		os.Exit(2)
	}
	if err := run(*pid, *bin, *depth, *top); err != nil {
		fmt.Fprintln(os.Stderr, "rssmap:", err)
		os.Exit(1)
	}
}

// mapping is one line of /proc/PID/maps that maps the binary.
type mapping struct {
	start, end uint64
	perms      string
}

func run(pid int, bin string, depth, top int) error {
	proc := "/proc/" + strconv.Itoa(pid)
	exe, err := os.Readlink(proc + "/exe")
	if err != nil {
		return err
	}
	if bin == "" {
		bin = proc + "/exe"
	}
	maps, err := binaryMappings(proc+"/maps", exe)
	if err != nil {
		return err
	}
	present, err := presentPages(proc+"/pagemap", maps)
	if err != nil {
		return err
	}
	f, err := elf.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return fmt.Errorf("reading the symbol table of %s (built with -s?): %w", bin, err)
	}

	if st, err := os.ReadFile(proc + "/status"); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			for _, k := range []string{"VmRSS:", "RssAnon:", "RssFile:"} {
				if strings.HasPrefix(line, k) {
					fmt.Println(strings.Join(strings.Fields(line), " "))
				}
			}
		}
	}

	// Sections: resident KB of each allocated section of the binary.
	fmt.Printf("\n%-14s %10s %10s\n", "section", "size KB", "resident")
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS || s.Size < pageSize {
			continue
		}
		fmt.Printf("%-14s %10d %10d\n", s.Name, s.Size/1024, residentIn(present, s.Addr, s.Addr+s.Size)/1024)
		if s.Name == ".gopclntab" {
			pclntabParts(s, present)
		}
	}

	// Packages: each symbol's resident bytes, split by mapping kind.
	text := map[string]uint64{}
	ro := map[string]uint64{}
	var textSum, roSum uint64
	for _, s := range syms {
		if s.Size == 0 || elf.ST_TYPE(s.Info) == elf.STT_SECTION || s.Section >= elf.SectionIndex(len(f.Sections)) {
			continue
		}
		n := residentIn(present, s.Value, s.Value+s.Size)
		if n == 0 {
			continue
		}
		sec := f.Sections[s.Section]
		g := group(s.Name, depth)
		switch {
		case sec.Flags&elf.SHF_EXECINSTR != 0:
			text[g] += n
			textSum += n
		case sec.Flags&elf.SHF_WRITE == 0:
			ro[g] += n
			roSum += n
		}
	}
	groups := map[string]bool{}
	for g := range text {
		groups[g] = true
	}
	for g := range ro {
		groups[g] = true
	}
	order := make([]string, 0, len(groups))
	for g := range groups {
		order = append(order, g)
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := text[order[i]]+ro[order[i]], text[order[j]]+ro[order[j]]
		if a != b {
			return a > b
		}
		return order[i] < order[j]
	})
	fmt.Printf("\nresident KB by symbol (a page shared by two symbols counts for both, in the bytes each covers)\n")
	fmt.Printf("%-60s %8s %8s %8s\n", "package", "text", "rodata", "total")
	var restT, restR uint64
	for i, g := range order {
		if i >= top {
			restT += text[g]
			restR += ro[g]
			continue
		}
		fmt.Printf("%-60s %8d %8d %8d\n", g, text[g]/1024, ro[g]/1024, (text[g]+ro[g])/1024)
	}
	if len(order) > top {
		fmt.Printf("%-60s %8d %8d %8d\n", fmt.Sprintf("(%d more)", len(order)-top), restT/1024, restR/1024, (restT+restR)/1024)
	}
	fmt.Printf("%-60s %8d %8d %8d\n", "all symbols", textSum/1024, roSum/1024, (textSum+roSum)/1024)
	return nil
}

// pclntabParts prints the resident KB of each table in .gopclntab (Go
// 1.20+ layout: a header of offsets, then function names, compilation
// units, files, the pc-value tables and the function table): the runtime
// reads a function's entries when it unwinds a stack through it (GC stack
// scans, stack growth, tracebacks, runtime.Callers).
func pclntabParts(s *elf.Section, present map[uint64]bool) {
	h := make([]byte, 8+8*8)
	if _, err := s.ReadAt(h, 0); err != nil || binary.LittleEndian.Uint32(h) != 0xfffffff1 || h[7] != 8 {
		fmt.Println("  (pclntab layout not known to rssmap)")
		return
	}
	word := func(i int) uint64 { return binary.LittleEndian.Uint64(h[8+8*i:]) }
	names := []string{"funcnames", "cus", "files", "pc-values", "functab"}
	offs := []uint64{word(3), word(4), word(5), word(6), word(7), s.Size}
	for i, n := range names {
		lo, hi := s.Addr+offs[i], s.Addr+offs[i+1]
		fmt.Printf("  %-12s %10d %10d\n", n, (hi-lo)/1024, residentIn(present, lo, hi)/1024)
	}
}

// binaryMappings are the mappings of /proc/PID/maps backed by the file exe.
func binaryMappings(path, exe string) ([]mapping, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []mapping
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || filepath.Clean(fields[5]) != exe {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("parsing %q in %s", fields[0], path)
		}
		out = append(out, mapping{start, end, fields[1]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no mapping of %s in %s", exe, path)
	}
	return out, nil
}

// presentPages reads the present bit (63) of every page of maps from
// /proc/PID/pagemap; the result holds the page numbers that are resident.
func presentPages(path string, maps []mapping) (map[uint64]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	present := map[uint64]bool{}
	for _, m := range maps {
		n := (m.end - m.start) / pageSize
		buf := make([]byte, n*8)
		if _, err := f.ReadAt(buf, int64(m.start/pageSize*8)); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		for i := uint64(0); i < n; i++ {
			if binary.LittleEndian.Uint64(buf[i*8:])&(1<<63) != 0 {
				present[m.start/pageSize+i] = true
			}
		}
	}
	return present, nil
}

// residentIn is how many bytes of [lo, hi) lie on present pages.
func residentIn(present map[uint64]bool, lo, hi uint64) uint64 {
	var n uint64
	for p := lo / pageSize; p*pageSize < hi; p++ {
		if !present[p] {
			continue
		}
		a, b := max(lo, p*pageSize), min(hi, (p+1)*pageSize)
		n += b - a
	}
	return n
}

// group is the package of a Go symbol name, cut to depth path elements:
// "type:*github.com/a/b/c.T" is github.com/a/b at depth 3. Linker symbols
// with no package (go:string.*, runtime.pclntab's neighbours) keep their
// prefix.
func group(sym string, depth int) string {
	s := strings.TrimPrefix(sym, "type:")
	s = strings.TrimLeft(s, "*[]")
	if strings.HasPrefix(s, "go:") {
		if i := strings.IndexAny(s, ".*"); i > 0 {
			return s[:i]
		}
		return s
	}
	slash := strings.LastIndex(s, "/")
	if i := strings.Index(s[slash+1:], "."); i >= 0 {
		s = s[:slash+1+i]
	}
	if depth > 0 {
		if parts := strings.Split(s, "/"); len(parts) > depth {
			if !strings.Contains(parts[0], ".") {
				depth = 1 // the standard library: crypto/tls → crypto
			}
			s = strings.Join(parts[:depth], "/")
		}
	}
	return s
}
