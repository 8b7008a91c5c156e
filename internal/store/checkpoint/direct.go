// O_DIRECT writes on restore.

package checkpoint

import (
	"errors"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directAlign is what O_DIRECT asks of a write's buffer address, offset
// and length on any Linux file system: no logical block is larger.
const directAlign = 4096

// directMin is the smallest file a restore writes with O_DIRECT: a
// direct write waits for the disk, which only whole chunks of large
// files (weights, the bulk of a workspace) repay; small files go
// through the page cache, whose writes return at once.
const directMin = 1 << 20

// directWrites can be turned off by tests, to compare both paths.
var directWrites = true

func roundUp(n int) int { return (n + directAlign - 1) &^ (directAlign - 1) }

// alignedBuf is n bytes at a directAlign boundary, with room to pad a
// write of them to a whole block.
func alignedBuf(n int) []byte {
	b := make([]byte, roundUp(n)+directAlign)
	skip := (directAlign - int(uintptr(unsafe.Pointer(&b[0]))&(directAlign-1))) & (directAlign - 1)
	return b[skip : skip+n : skip+roundUp(n)]
}

func isAligned(b []byte) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))&(directAlign-1) == 0
}

// setDirect turns O_DIRECT on for an open file: its writes then go from
// our buffer to the disk, never copied into the page cache nor written
// back later, which on a restore is most of the CPU it costs. A file
// system that refuses it (some FUSE and old tmpfs) keeps buffered writes.
func setDirect(f *os.File) bool {
	fd := f.Fd()
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return false
	}
	_, err = unix.FcntlInt(fd, unix.F_SETFL, fl|unix.O_DIRECT)
	return err == nil
}

func clearDirect(f *os.File) {
	fd := f.Fd()
	if fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(fd, unix.F_SETFL, fl&^unix.O_DIRECT)
	}
}

// writeChunk writes data at off. While direct holds, an aligned chunk is
// written with O_DIRECT, its tail padded to a whole block with zeros
// (the caller truncates the file to its size once every chunk is in); a
// write the file system refuses as unaligned turns direct off for the
// file and is written again through the page cache.
func writeChunk(f *os.File, direct *atomic.Bool, data []byte, off int64) error {
	if direct.Load() && off%directAlign == 0 && isAligned(data) && roundUp(len(data)) <= cap(data) {
		padded := data[:roundUp(len(data))]
		clear(padded[len(data):])
		_, err := f.WriteAt(padded, off)
		if !errors.Is(err, unix.EINVAL) {
			return err
		}
		if direct.CompareAndSwap(true, false) {
			clearDirect(f)
		}
	}
	_, err := f.WriteAt(data, off)
	return err
}
