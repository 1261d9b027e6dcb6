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
// Release unmaps those pages (madvise MADV_DONTNEED): a page used later
// comes back from the page cache on its first touch, with the pages around
// it as at start-up. Nothing is lost: the pages are clean copies of the
// file. Unmapped, they stay in the page cache as any file read does, for
// the kernel to reclaim first when memory is short.
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
}
