// Package binpages gives back to the kernel the pages of the running
// binary that only its start-up used.
//
// An executable's code, read-only data and function tables are mapped from
// its file; a page counts in the process's resident memory from its first
// touch until the kernel takes it back. Start-up touches pages all over a
// large Go binary (every linked package's init, the migrations, the first
// pass of every loop), and the kernel maps 64 kB around each page fault
// (fault-around), so after start-up most of the binary is resident though
// an idle server uses a fraction of it (docs/design/memory.md).
//
// Release unmaps those pages (madvise MADV_DONTNEED) and drops them from
// the page cache (posix_fadvise POSIX_FADV_DONTNEED: the file's pages that
// nothing maps, any more than they are already written). Nothing is lost:
// the pages are clean copies of the file, read again on their next touch.
//
// How they come back differs by mapping. Code comes back as at start-up,
// with read-ahead and the 64 kB around each fault. The read-only data and
// the function tables (.rodata, .gopclntab) are read at scattered places
// (the runtime reads a function's entries whenever the GC scans a stack
// through it), so a page at a time (MADV_RANDOM: without read-ahead the
// fault-around finds no cached neighbours to map): those 64 kB around
// each entry were most of an idle server's resident tables. The cost is a
// read from the disk for each such page on its first touch after the
// release (docs/design/memory.md has the figures).
package binpages

// Released is what Release did.
type Released struct {
	// Mappings is how many of the executable's mappings were released.
	Mappings int
	// Bytes is how much of them was resident before.
	Bytes int64
	// Skipped is how many of its read-only mappings were left as they
	// were because they hold private copies of pages (a relocated
	// read-only segment, a debugger's breakpoint), which only the
	// process has.
	Skipped int
	// Evicted: the file's unmapped pages were dropped from the page
	// cache.
	Evicted bool
}
