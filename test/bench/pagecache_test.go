//go:build bench

package bench

import (
	"fmt"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pageCacheMode is BENCH_PAGECACHE: cold (the default) drops the CCM binary's pages from the
// page cache before each start, warm leaves them as the build left them.
//
// Why: most of the peak RSS is the binary's own pages (RssFile), and how many of them a start
// maps depends on what the page cache holds. Right after `go build` the whole file is cached,
// in folios whose sizes depend on how the linker wrote it, and a start maps whole folios and
// their neighbours: two builds of one commit (cgo and static) differed by 4 MiB of RssFile
// that way, in opposite directions for two commits (docs/performance.md § Memory). Read from
// disk, as on a node after the image was pulled and its pages reclaimed, the binary's pages
// come in by the kernel's readahead of what the process touches, and runs of one binary agree
// within about 1 MiB.
func pageCacheMode(t *testing.T) string {
	mode := envOr("BENCH_PAGECACHE", "cold")
	if mode != "cold" && mode != "warm" {
		t.Fatalf("BENCH_PAGECACHE=%q: want cold or warm", mode)
	}
	return mode
}

// dropFromPageCache writes back and drops the cached pages of the file at path
// (posix_fadvise POSIX_FADV_DONTNEED), and returns the share of its pages still cached after
// (pages mapped by a running process stay).
func dropFromPageCache(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("drop %s from the page cache: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("drop %s from the page cache: fsync: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return 0, fmt.Errorf("drop %s from the page cache: fadvise: %w", path, err)
	}
	return cachedShare(f)
}

// cachedShare returns the share of f's pages in the page cache (mincore of a mapping of it).
func cachedShare(f *os.File) (float64, error) {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	defer unix.Munmap(m) //nolint:errcheck // read-only mapping
	pages := (len(m) + os.Getpagesize() - 1) / os.Getpagesize()
	vec := make([]byte, pages)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, fmt.Errorf("mincore %s: %w", f.Name(), errno)
	}
	cached := 0
	for _, v := range vec {
		cached += int(v & 1)
	}
	return float64(cached) / float64(pages), nil
}
