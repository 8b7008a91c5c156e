package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/mlrb/mlrb/internal/store/safefs"
)

// Restore writes a checkpoint's tree into dir, verifying every chunk hash.
func (e *Engine) Restore(ctx context.Context, m *Manifest, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	if err := m.check(); err != nil {
		return fmt.Errorf("restore %s #%d: %w", m.RunID, m.Seq, err)
	}
	// dir is the caller's own path (a symlink to a scratch disk, say);
	// below it, nothing is followed.
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	root, err := safefs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	defer func() { _ = root.Close() }()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.parallel())
	r := &restoring{e: e, ctx: gctx, g: g, chunkSize: m.ChunkSize, bufs: e.buffers(m.ChunkSize), root: root}
	var dirs, links []File
	for _, f := range m.Files {
		clean := path.Clean(f.Path)
		if clean != f.Path || strings.HasPrefix(clean, "../") || path.IsAbs(clean) || clean == ".." {
			return fmt.Errorf("restore %s #%d: unsafe path %q in manifest", m.RunID, m.Seq, f.Path)
		}
		target := filepath.Join(dir, filepath.FromSlash(f.Path))
		// Nothing is ever written through a symlink the checkpoint holds.
		if err := parentsInside(dir, f.Path); err != nil {
			return fmt.Errorf("restore %s #%d: %w", m.RunID, m.Seq, err)
		}
		switch {
		case f.Mode.IsDir():
			if err := mkdirInside(dir, f.Path); err != nil {
				return fmt.Errorf("restore %s: %w", f.Path, err)
			}
			dirs = append(dirs, f)
		case f.Mode&fs.ModeSymlink != 0:
			_ = os.Remove(target)
			if err := os.Symlink(f.Link, target); err != nil {
				return fmt.Errorf("restore %s: %w", f.Path, err)
			}
		case f.HardLink != "":
			links = append(links, f) // once the file it links to is written
		case f.Pack != "":
			// Written by its pack's task (groupPacks, below).
		default:
			if err := r.file(f); err != nil {
				_ = g.Wait()
				return fmt.Errorf("restore %s #%d: %w", m.RunID, m.Seq, err)
			}
		}
	}
	for _, p := range groupPacks(m.Files) {
		g.Go(func() error { return r.unpack(p) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("restore %s #%d: %w", m.RunID, m.Seq, err)
	}
	if err := restoreLinks(m, dir, links); err != nil {
		return err
	}
	// Directory modes last, so a read-only dir does not block its children.
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i].Path) > len(dirs[j].Path) })
	for _, d := range dirs {
		p := filepath.Join(dir, filepath.FromSlash(d.Path))
		if st, err := os.Lstat(p); err != nil || !st.IsDir() {
			return fmt.Errorf("restore %s: no longer a directory", d.Path)
		}
		if err := os.Chmod(p, d.Mode.Perm()); err != nil {
			return fmt.Errorf("restore %s: %w", d.Path, err)
		}
	}
	return nil
}

// parentsInside makes the directories above rel under dir, refusing a
// component that exists as anything but a directory (a symlink restored
// earlier): a write below it would land wherever it points.
func parentsInside(dir, rel string) error {
	parent := path.Dir(rel)
	if parent == "." {
		return nil
	}
	return mkdirInside(dir, parent)
}

// mkdirInside makes dir/rel component by component, never through a
// symlink.
func mkdirInside(dir, rel string) error {
	p := dir
	for _, part := range strings.Split(rel, "/") {
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if !st.IsDir() {
			return fmt.Errorf("%s: %s is a %s, not a directory: refused", rel, p, st.Mode().Type())
		}
	}
	return nil
}

// restoreLinks recreates hardlinks, each to a regular file of the same
// snapshot restored before it.
func restoreLinks(m *Manifest, dir string, links []File) error {
	if len(links) == 0 {
		return nil
	}
	regular := map[string]bool{}
	for _, f := range m.Files {
		if f.Mode.IsRegular() && f.HardLink == "" {
			regular[f.Path] = true
		}
	}
	for _, f := range links {
		if !regular[f.HardLink] {
			return fmt.Errorf("restore %s #%d: %s links to %q, which is no regular file of the checkpoint", m.RunID, m.Seq, f.Path, f.HardLink)
		}
		target := filepath.Join(dir, filepath.FromSlash(f.Path))
		_ = os.Remove(target)
		if err := os.Link(filepath.Join(dir, filepath.FromSlash(f.HardLink)), target); err != nil {
			return fmt.Errorf("restore %s: %w", f.Path, err)
		}
	}
	return nil
}

// preallocate gives a file its blocks up front, in as few extents as the
// filesystem can (chunks then land in them in any order without growing
// the file piece by piece), and its size; a filesystem that cannot
// allocate ahead gets a sparse file of the size.
func preallocate(f *os.File, size int64) error {
	if size > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err == nil {
			return nil
		}
	}
	return f.Truncate(size)
}

// setMTime sets an open file's access and modification times to mtime,
// to the nanosecond: the next checkpoint finds a restored file unchanged
// by its mtime, where futimes (microseconds) would have it read again.
func setMTime(fd int, mtime int64) error {
	ts := unix.NsecToTimespec(mtime)
	return unix.UtimesNano("/proc/self/fd/"+strconv.Itoa(fd), []unix.Timespec{ts, ts})
}

// restoring is one restore's chunk pipeline: its group of chunk tasks
// and the buffers they share.
type restoring struct {
	e         *Engine
	ctx       context.Context
	g         *errgroup.Group
	chunkSize int
	bufs      *chunkBufs
	// root is the directory restored into: every file is created in its
	// directory's descriptor, opened from root (placing.go).
	root *safefs.Dir
}

// file creates the file at its full size and queues one task per chunk
// (fetch, verify, write at its offset); the last one to finish sets mode
// and mtime and renames the file into place.
func (r *restoring) file(f File) error {
	d, err := r.dir(path.Dir(f.Path))
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	p, err := create(d, path.Base(f.Path), func() { r.release(d) })
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	if err := preallocate(p.out, f.Size); err != nil {
		p.abandon()
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	var direct atomic.Bool
	padded := directWrites && f.Size >= directMin && r.chunkSize%directAlign == 0 && setDirect(p.out)
	direct.Store(padded)
	finish := func() error {
		if err := p.commit(f, padded); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		return nil
	}
	if len(f.Chunks) == 0 {
		return finish()
	}
	var left atomic.Int64
	left.Store(int64(len(f.Chunks)))
	var written atomic.Int64
	for i, h := range f.Chunks {
		r.g.Go(func() error {
			b := r.bufs.get()
			data, err := r.e.readChunk(r.ctx, h, b)
			if err == nil {
				err = writeChunk(p.out, &direct, data, int64(i)*int64(r.chunkSize))
				written.Add(int64(len(data)))
				report(r.ctx, int64(len(data)))
			}
			r.bufs.put(b)
			if err != nil {
				p.abandon()
				return fmt.Errorf("%s: %w", f.Path, err)
			}
			if left.Add(-1) > 0 {
				return nil
			}
			if n := written.Load(); n != f.Size {
				p.abandon()
				return fmt.Errorf("%s: restored %d bytes, manifest says %d", f.Path, n, f.Size)
			}
			return finish()
		})
	}
	return nil
}
