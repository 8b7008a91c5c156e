// Torn files: a file that kept changing while it was read.

package checkpoint

import (
	"errors"
	"io"
	"os"
	"time"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// How a save tells that a file changed while it was read: its size or
// mtime moved, or, within a clock tick of its last write, its bytes on a
// second read.

// ErrTorn means a file kept changing while it was read.
var ErrTorn = errors.New("file changed while it was read")

// A file's mtime comes from the kernel's coarse clock, which advances
// once per tick (at most 10 ms): a write in the same tick as the last one
// leaves the mtime unchanged. A file modified less than RacyWindow ago may
// therefore hide a change from its mtime; where the file system truncates
// mtimes to whole seconds, coarseRacyWindow applies instead.
const (
	DefaultRacyWindow = 25 * time.Millisecond
	coarseRacyWindow  = 2 * time.Second
)

func (e *Engine) racy(mtime, now time.Time) bool {
	window := e.RacyWindow
	if window == 0 {
		window = DefaultRacyWindow
	}
	if mtime.Nanosecond() == 0 {
		window = max(window, coarseRacyWindow)
	}
	return now.Sub(mtime) < window
}

// settle reads an open file with read until a read agrees with the
// file's size and mtime before and after it: a committed checkpoint
// never holds a torn file. read says whether it saw the file whole and,
// when racy asks, the same bytes twice (file times tick coarsely, so a
// file written within the last moment can change without its mtime
// moving). After three tries the file is ErrTorn. settle returns the
// size and mtime read at, or last seen if read failed (errNotSmall).
func (e *Engine) settle(fh *os.File, size, mtime int64, read func(size int64, racy bool) (bool, error)) (int64, int64, error) {
	for try := 0; try < 3; try++ {
		same, err := read(size, e.racy(time.Unix(0, mtime), time.Now()))
		if err != nil {
			return size, mtime, err
		}
		var after unix.Stat_t
		if err := unix.Fstat(int(fh.Fd()), &after); err != nil {
			return size, mtime, err
		}
		if same && after.Size == size && after.Mtim.Nano() == mtime {
			return size, mtime, nil
		}
		size, mtime = after.Size, after.Mtim.Nano()
	}
	return size, mtime, ErrTorn
}

// quickSums is a fast non-cryptographic checksum per chunk, read in
// parallel, only to tell whether a file changed between two reads.
func (e *Engine) quickSums(f *os.File, size int64) ([]uint64, error) {
	cs := int64(e.ChunkSize)
	sums := make([]uint64, (size+cs-1)/cs)
	var g errgroup.Group
	g.SetLimit(e.parallel())
	for i := range sums {
		g.Go(func() error {
			b := e.bufs.get()
			defer e.bufs.put(b)
			off := int64(i) * cs
			buf := b.data[:min(cs, size-off)]
			if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			sums[i] = xxhash.Sum64(buf)
			return nil
		})
	}
	return sums, g.Wait()
}

// readWhole fills buf from the start of f and tells whether that was all
// of f.
func readWhole(f *os.File, buf []byte) (bool, error) {
	k, err := f.ReadAt(buf, 0)
	if k < len(buf) {
		if err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		return false, nil
	}
	var extra [1]byte
	k, err = f.ReadAt(extra[:], int64(len(buf)))
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return k == 0, nil
}
