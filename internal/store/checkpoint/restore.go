// Restore writes a checkpoint's tree into dir, verifying every chunk hash.

package checkpoint

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
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
	err := m.check()
	if err == nil {
		err = m.checkTree()
	}
	if err != nil {
		return fmt.Errorf("restore %s #%d: %w", m.RunID, m.Seq, err)
	}
	// dir is the caller's own path (a symlink to a scratch disk, say);
	// below it, nothing is followed.
	dir, err = filepath.EvalSymlinks(dir)
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
	r := &restoring{e: e, ctx: gctx, g: g, chunkSize: m.ChunkSize, bufs: e.buffers(m.ChunkSize), root: root, made: map[string]bool{}}
	var dirs, links []File
	for _, f := range m.Files {
		// The manifest is one tree (checkTree): nothing is ever written
		// below a symlink it holds, and every directory on the way is
		// opened from root's descriptor, never resolved by path.
		if err := r.parents(f.Path); err != nil {
			_ = g.Wait()
			return fmt.Errorf("restore %s #%d: %s: %w", m.RunID, m.Seq, f.Path, err)
		}
		switch {
		case f.Mode.IsDir():
			d, err := root.MkdirAll(f.Path, 0o755)
			if err != nil {
				_ = g.Wait()
				return fmt.Errorf("restore %s: %w", f.Path, err)
			}
			_ = d.Close()
			dirs = append(dirs, f)
		case f.Mode&fs.ModeSymlink != 0:
			if err := r.symlink(f); err != nil {
				_ = g.Wait()
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
	for _, f := range links {
		if err := r.hardLink(f); err != nil {
			return fmt.Errorf("restore %s #%d: %s: %w", m.RunID, m.Seq, f.Path, err)
		}
	}
	// Directory modes last, so a read-only dir does not block its children.
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i].Path) > len(dirs[j].Path) })
	for _, d := range dirs {
		if err := r.chmodDir(d); err != nil {
			return fmt.Errorf("restore %s: %w", d.Path, err)
		}
	}
	return nil
}

// parents makes the directories above rel, each from its parent's
// descriptor; a component that exists as anything but a directory is
// refused.
func (r *restoring) parents(rel string) error {
	parent := path.Dir(rel)
	if parent == "." || r.made[parent] {
		return nil
	}
	d, err := r.root.MkdirAll(parent, 0o755)
	if err != nil {
		return err
	}
	r.made[parent] = true
	return d.Close()
}

// symlink creates f's symlink in its directory's descriptor, in place of
// a file or link of that name (never of a directory: unlinkat without
// AT_REMOVEDIR leaves one, and the symlinkat then fails).
func (r *restoring) symlink(f File) error {
	d, err := r.dir(path.Dir(f.Path))
	if err != nil {
		return err
	}
	defer r.release(d)
	name := path.Base(f.Path)
	if err := d.Unlink(name); err != nil {
		return err
	}
	if err := unix.Symlinkat(f.Link, d.Fd(), name); err != nil {
		return &os.PathError{Op: "symlink", Path: f.Path, Err: err}
	}
	return nil
}

// hardLink links f to the regular file it names (checkTree made sure the
// checkpoint holds one), both directories opened from root's descriptor
// and the target never followed if it is a link.
func (r *restoring) hardLink(f File) error {
	from, err := r.dir(path.Dir(f.HardLink))
	if err != nil {
		return err
	}
	defer r.release(from)
	to, err := r.dir(path.Dir(f.Path))
	if err != nil {
		return err
	}
	defer r.release(to)
	name := path.Base(f.Path)
	if err := to.Unlink(name); err != nil {
		return err
	}
	if err := unix.Linkat(from.Fd(), path.Base(f.HardLink), to.Fd(), name, 0); err != nil {
		return &os.PathError{Op: "link", Path: f.Path, Err: err}
	}
	return nil
}

// chmodDir gives a restored directory its mode through its descriptor.
func (r *restoring) chmodDir(f File) error {
	d, err := r.root.SubPath(f.Path)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	if err := unix.Fchmod(d.Fd(), uint32(f.Mode.Perm())); err != nil {
		return &os.PathError{Op: "chmod", Path: f.Path, Err: err}
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
	// made are the directories this restore has made (or found) already.
	made map[string]bool
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
