// Save: a workspace walked through descriptors into a checkpoint.

package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/errgroup"

	"github.com/mlrb/mlrb/internal/store/safefs"
)

// saving is one checkpoint being taken, whatever its source: the manifest
// so far, the unchanged files of the previous checkpoint, and the chunk
// uploads in flight.
type saving struct {
	e         *Engine
	m         *Manifest
	old       map[string]File // previous files quiet enough to reuse unread
	prev      map[string]File // every previous file, for unsettled ones
	g         *errgroup.Group
	ctx       context.Context // the group's: cancelled at its first error
	inflight  sync.Map        // chunks queued by this save
	newBytes  atomic.Int64
	newChunks atomic.Int64
	// foreign: prev is another run's checkpoint (a fork's).
	foreign bool
	// bytes is about what the entries so far cost the manifest.
	bytes int64
	// pack is the pack small files go into now; packs, those sealed.
	pack  *openPack
	packs []*sealedPack
	// packed places small files by content: the previous checkpoint's
	// packed files, then this save's.
	packed map[string]*packPlace
}

// save runs one checkpoint: it takes the save lock, lets walk add the
// files, waits for the uploads and commits the manifest.
func (e *Engine) save(ctx context.Context, meta Meta, prev *Manifest, what string, walk func(s *saving) error) (*Manifest, error) {
	s := &saving{e: e, old: map[string]File{}, prev: map[string]File{}, packed: map[string]*packPlace{}, m: &Manifest{Version: versionChunks, Hash: "blake3", ChunkSize: e.ChunkSize, RunID: meta.RunID, Seq: meta.Seq,
		Attempt: meta.Attempt, AgentSeconds: meta.AgentSeconds, Final: meta.Final, Ending: meta.Ending, Workdir: meta.Workdir, CreatedAt: time.Now().UTC()}}
	l, err := e.acquire(ctx, saveLockPrefix, gcLockPrefix, meta.RunID, false)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s #%d: %w", meta.RunID, meta.Seq, err)
	}
	defer l.release(ctx)
	if err := e.syncKnown(ctx); err != nil {
		return nil, fmt.Errorf("checkpoint %s #%d: %w", meta.RunID, meta.Seq, err)
	}
	// A file may skip re-reading when size, mtime and mode match the
	// previous checkpoint, but only if it was already quiet then: a change
	// within the same mtime tick would otherwise go unseen.
	// Chunk lists are only reusable at the chunk size they were cut at:
	// restore writes each chunk at its index times the manifest's size.
	if prev != nil && prev.ChunkSize == e.ChunkSize {
		s.foreign = prev.RunID != meta.RunID
		for _, f := range prev.Files {
			s.prev[f.Path] = f
			if f.Pack != "" && f.HardLink == "" && !e.NoPacks {
				s.packed[f.Chunks[0]] = &packPlace{pack: f.Pack, off: f.PackOffset}
			}
			if !e.racy(time.Unix(0, f.MTime), prev.CreatedAt) {
				s.old[f.Path] = f
			}
		}
	}
	s.g, s.ctx = errgroup.WithContext(ctx)
	s.g.SetLimit(e.parallel())
	err = walk(s)
	if err == nil {
		s.seal()
	} else if s.pack != nil {
		e.bufs.put(s.pack.b)
	}
	if gerr := s.g.Wait(); err == nil {
		err = gerr
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s #%d of %s: %w", meta.RunID, meta.Seq, what, err)
	}
	s.placePacked()
	s.dropDangling()
	s.m.NewBytes, s.m.NewChunks = s.newBytes.Load(), int(s.newChunks.Load())
	if err := e.commit(ctx, s.m); err != nil {
		return nil, err
	}
	return s.m, nil
}

// unchanged returns the previous checkpoint's entry of f if its chunks
// (or pack) still describe it, and are still stored: a fork's previous
// checkpoint is another run's, whose retention may have dropped it and a
// GC its chunks, so its chunks are checked once per GC generation (the
// run's own latest checkpoint is never dropped while it runs).
func (s *saving) unchanged(f File) (File, bool) {
	o, ok := s.old[f.Path]
	if !ok || o.Size != f.Size || o.MTime != f.MTime || o.Mode != f.Mode || (o.Pack != "" && s.e.NoPacks) || !s.stillStored(o.Stored()) {
		return File{}, false // read the file
	}
	return o, true
}

// stillStored tells whether chunks of the previous checkpoint are still
// in the store: always for the run's own, checked once per GC generation
// for a fork's.
func (s *saving) stillStored(chunks []string) bool {
	if !s.foreign {
		return true
	}
	for _, h := range chunks {
		if _, known := s.e.known.Load(h); known {
			continue
		}
		if ok, err := s.e.Store.Exists(s.ctx, chunkKey(h)); err != nil || !ok {
			return false
		}
		s.e.known.Store(h, struct{}{})
	}
	return true
}

func (s *saving) add(f File) {
	s.m.Files = append(s.m.Files, f)
	s.m.Bytes += f.Size
}

// store hashes a chunk read into b, records its hash at chunks[i] (then
// calls done, if any) and stores the chunk unless the store or this save
// already has it. The buffer goes back to the free list.
func (s *saving) store(b *chunkBuf, buf []byte, chunks []string, i int, done func()) error {
	defer s.e.bufs.put(b)
	h := chunkHash(buf)
	chunks[i] = h
	if done != nil {
		done()
	}
	_, stored := s.e.known.Load(h)
	if _, queued := s.inflight.LoadOrStore(h, struct{}{}); stored || queued {
		return nil
	}
	put, err := s.e.putChunk(s.ctx, h, buf, b, true)
	if err == nil && put {
		s.newBytes.Add(int64(len(buf)))
		s.newChunks.Add(1)
	}
	return err
}

// Save snapshots dir. prev, if given, lets files whose size and mtime did
// not change reuse their chunks without being read again.
//
// The agent may be running and racing the walk: every entry is stat'd
// from its directory's descriptor and every file read through the
// descriptor of the inode listed, so a directory swapped for a symlink
// after it was listed is never followed (safefs.Dir.Walk).
func (e *Engine) Save(ctx context.Context, dir string, meta Meta, prev *Manifest) (*Manifest, error) {
	return e.save(ctx, meta, prev, dir, func(s *saving) error {
		root, err := safefs.OpenDir(dir)
		if err != nil {
			return err
		}
		defer func() { _ = root.Close() }()
		inodes := map[[2]uint64]string{} // files with more than one link, by device and inode
		err = root.Walk(func(en safefs.Entry) error {
			if s.ctx.Err() != nil {
				return s.ctx.Err()
			}
			if e.MaxEntries > 0 && int64(len(s.m.Files)) >= e.MaxEntries {
				s.incomplete(fmt.Sprintf("the workspace holds more entries than agent.workspace_max_entries = %d (each is a line of every checkpoint's manifest)", e.MaxEntries))
				return fs.SkipAll
			}
			if e.excluded(en.Rel) {
				return fs.SkipDir
			}
			if why := unrestorable(en); why != "" {
				if len(s.m.Omitted) < maxOmitted {
					s.m.Omitted = append(s.m.Omitted, en.Rel[:min(len(en.Rel), 256)])
				}
				s.incomplete(why)
				return fs.SkipDir
			}
			if s.bytes += entryBytes(en); s.bytes > MaxManifestBytes {
				s.incomplete(fmt.Sprintf("the workspace's paths add up to more than a manifest holds (%d MiB)", MaxManifestBytes>>20))
				return fs.SkipAll
			}
			return s.addEntry(ctx, en, inodes)
		})
		if errors.Is(err, fs.SkipAll) {
			return nil
		}
		return err
	})
}

// addEntry adds one walked entry to the manifest: a directory, a link, or
// a regular file read unless its previous chunks still describe it.
// Sockets, FIFOs and devices are not workspace content.
func (s *saving) addEntry(ctx context.Context, en safefs.Entry, inodes map[[2]uint64]string) error {
	st := en.Stat
	f := File{Path: en.Rel, Mode: safefs.Mode(st)}
	var err error
	switch {
	case f.Mode&fs.ModeSymlink != 0:
		if f.Link, err = en.Readlink(); err != nil {
			return gone(err)
		}
		s.bytes += int64(len(f.Link))
	case f.Mode.IsDir():
	case f.Mode.IsRegular():
		id := [2]uint64{st.Dev, st.Ino}
		if st.Nlink > 1 {
			if first, seen := inodes[id]; seen {
				f.HardLink = first
				s.m.Files = append(s.m.Files, f)
				return nil
			}
		}
		f.Size, f.MTime = st.Size, st.Mtim.Nano()
		var pl *packPlace
		if o, ok := s.unchanged(f); ok {
			f.sameContent(o)
			report(ctx, f.Size)
		} else if f, pl, err = s.readEntry(en, f); err != nil || f.Path == "" {
			return err
		}
		if st.Nlink > 1 {
			inodes[id] = f.Path
		}
		s.add(f)
		if pl != nil {
			s.place(pl, f.Size)
		}
		return nil
	default:
		return nil
	}
	s.add(f)
	return nil
}

// readEntry reads a regular file's content into f through one descriptor
// (the inode listed), a small one into the open pack (pl: where it is
// kept, once f is added); f comes back with no path when the file is
// left out (gone, replaced, or torn with no previous version).
func (s *saving) readEntry(en safefs.Entry, f File) (File, *packPlace, error) {
	fh, st, err := en.Open()
	if err != nil {
		return File{}, nil, gone(err)
	}
	defer func() { _ = fh.Close() }()
	f.Size, f.MTime = st.Size, st.Mtim.Nano()
	var h string
	var pl *packPlace
	h, f.Size, f.MTime, err = s.packFile(fh, f.Size, f.MTime)
	if err == nil {
		f.Chunks = []string{h}
		pl = s.placeSmall(h)
	} else if errors.Is(err, errNotSmall) {
		f.Chunks, f.Size, f.MTime, err = s.saveFile(fh, f.Size, f.MTime)
	}
	if errors.Is(err, ErrTorn) {
		s.m.Unsettled = append(s.m.Unsettled, f.Path)
		old, had := s.prev[f.Path]
		if had && old.HardLink != "" {
			// Its previous version was a second name of another file:
			// that file's content then, under this name, as this
			// checkpoint may not hold the other name.
			t, ok := s.prev[old.HardLink]
			had = ok && t.HardLink == "" && t.Mode.IsRegular()
			t.Path, t.Mode = f.Path, old.Mode
			old = t
		}
		if !had {
			return File{}, nil, nil
		}
		return old, nil, nil
	}
	if err != nil {
		return File{}, nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return f, pl, nil
}

// saveFile reads an open file in chunks and queues hashing and
// uploading of each; if the file changed meanwhile (its size or mtime on
// the descriptor moved) it is read again, and after three tries it is
// ErrTorn: a committed checkpoint never holds a torn file. It returns the
// chunks with the size and mtime they were read at.
func (s *saving) saveFile(fh *os.File, size, mtime int64) ([]string, int64, int64, error) {
	var chunks []string
	size, mtime, err := s.e.settle(fh, size, mtime, func(size int64, racy bool) (bool, error) {
		c, sums, err := s.readChunks(fh, size, racy)
		switch {
		case errors.Is(err, errChanged):
			return false, nil
		case err != nil:
			return false, err
		}
		chunks = c
		if !racy {
			return true, nil
		}
		again, err := s.e.quickSums(fh, size) // chunk for chunk
		return slices.Equal(sums, again), err
	})
	if err != nil {
		return nil, 0, 0, err
	}
	return chunks, size, mtime, nil
}

// readChunks reads a file's chunks in parallel (pread), hashes them
// (BLAKE3) and queues their compression and upload in the group. It
// returns once every chunk is read, with the chunk hashes and, if asked, a
// quick checksum per chunk; the uploads go on.
func (s *saving) readChunks(f *os.File, size int64, withSums bool) ([]string, []uint64, error) {
	e := s.e
	cs := int64(e.ChunkSize)
	n := int((size + cs - 1) / cs)
	chunks := make([]string, n)
	var sums []uint64
	if withSums {
		sums = make([]uint64, n)
	}
	var read sync.WaitGroup
	var short atomic.Bool
	var readErr atomic.Value
	for i := 0; i < n && s.ctx.Err() == nil; i++ {
		read.Add(1)
		b := e.bufs.get()
		off := int64(i) * cs
		buf := b.data[:min(cs, size-off)]
		// The read runs in the group too: chunks of a big file are read and
		// hashed on every core.
		s.g.Go(func() error {
			k, err := f.ReadAt(buf, off)
			if k < len(buf) {
				if err != nil && !errors.Is(err, io.EOF) {
					readErr.CompareAndSwap(nil, err)
				}
				short.Store(true)
				e.bufs.put(b)
				read.Done()
				return nil
			}
			report(s.ctx, int64(k))
			if withSums {
				sums[i] = xxhash.Sum64(buf)
			}
			if e.readHook != nil {
				e.readHook(f.Name(), i)
			}
			return s.store(b, buf, chunks, i, read.Done)
		})
	}
	read.Wait()
	if err := s.ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err, ok := readErr.Load().(error); ok {
		return nil, nil, err
	}
	var extra [1]byte
	if k, _ := f.ReadAt(extra[:], size); short.Load() || k > 0 {
		return nil, nil, errChanged
	}
	return chunks, sums, nil
}
