// Package checkpoint snapshots a workspace into a blob store as
// content-addressed, zstd-compressed chunks plus one manifest per
// checkpoint. The manifest is written last: a checkpoint without its
// manifest does not exist, and its chunks are merely unreferenced.
package checkpoint

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"
	"golang.org/x/sync/errgroup"

	"github.com/mlrb/mlrb/internal/blob"
)

// Manifest lists a checkpoint's files and the chunks they are made of.
type Manifest struct {
	Version      int       `json:"version"`
	Hash         string    `json:"hash"`
	ChunkSize    int       `json:"chunk_size"`
	RunID        string    `json:"run_id"`
	Seq          int       `json:"seq"`
	Attempt      int       `json:"attempt"`
	CreatedAt    time.Time `json:"created_at"`
	AgentSeconds float64   `json:"agent_seconds"`
	Files        []File    `json:"files"`
	Bytes        int64     `json:"bytes"`
	NewBytes     int64     `json:"new_bytes"`
	NewChunks    int       `json:"new_chunks"`
	// Final marks the checkpoint taken when the agent ended; retention
	// never deletes it.
	Final bool `json:"final,omitempty"`
	// Ending is how the agent ended, on a final checkpoint.
	Ending *Ending `json:"ending,omitempty"`
	// Workdir is where MLRB_WORKDIR lies in the snapshot ("" for the root).
	Workdir string `json:"workdir,omitempty"`
	// Unsettled lists files that kept changing while they were read: each
	// holds its version from the previous checkpoint, or is left out when
	// it had none. A file written without pause (a training log) must not
	// block every checkpoint, and a torn file is never committed.
	Unsettled []string `json:"unsettled,omitempty"`
	// SupersededBy is, in a listing, the later attempt that made this
	// checkpoint a zombie's (0: it is the run's).
	SupersededBy int `json:"-"`
}

// File is one entry of a workspace: a regular file, a directory or a symlink.
type File struct {
	Path   string      `json:"path"`
	Mode   fs.FileMode `json:"mode"`
	Size   int64       `json:"size,omitempty"`
	MTime  int64       `json:"mtime_ns,omitempty"`
	Link   string      `json:"link,omitempty"`
	Chunks []string    `json:"chunks,omitempty"`
	// HardLink names the earlier file of the snapshot this one is a
	// hardlink to (same inode): restored as a link, its bytes stored once.
	HardLink string `json:"hardlink,omitempty"`
}

// Meta is what the caller says about a checkpoint it saves.
type Meta struct {
	RunID        string
	Seq          int
	Attempt      int
	AgentSeconds float64
	Final        bool
	Ending       *Ending
	Workdir      string
}

// Ending is how the agent ended, kept with its final checkpoint so that a
// run continued later (a resumed benchmark) knows whether and how to
// evaluate it without starting the agent again.
type Ending struct {
	StoppedBy string `json:"stopped_by"`
	ExitCode  int    `json:"exit_code"`
	Reason    string `json:"reason,omitempty"`
}

// ErrTorn means a file kept changing while it was read.
var ErrTorn = errors.New("file changed while it was read")

// Engine saves and restores checkpoints.
type Engine struct {
	Store     blob.Store
	ChunkSize int
	// Parallel bounds the chunk uploads and downloads in flight.
	Parallel int
	// RacyWindow overrides DefaultRacyWindow.
	RacyWindow time.Duration
	// Exclude are path globs (path.Match, against a file's path in the
	// snapshot) never saved: credentials a tool writes into the workspace.
	// A directory that matches is left out whole.
	Exclude []string
	// known holds hashes of chunks confirmed stored, so later checkpoints
	// skip even the existence check. It is good for one GC generation
	// (knownGen): a GC in any process may delete what it remembers.
	known    sync.Map
	knownMu  sync.Mutex
	knownGen string
	// bufs recycles chunk buffers: allocating a fresh one per chunk costs
	// more than hashing it.
	bufs sync.Pool
	// readHook, for tests, runs after each chunk is read.
	readHook func(path string, chunk int)
}

// New returns an engine with sane defaults for zero values.
func New(store blob.Store, chunkSize int) *Engine {
	if chunkSize <= 0 {
		chunkSize = 4 << 20
	}
	return &Engine{Store: store, ChunkSize: chunkSize, Parallel: 4}
}

var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	// A chunk never decodes past the largest chunk size (config allows
	// 256 MiB): a crafted chunk cannot make a restore allocate more.
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxChunkSize), zstd.WithDecoderMaxWindow(MaxChunkSize))
)

// MaxChunkSize bounds checkpoint.chunk_size, and so what one chunk may
// decode to.
const MaxChunkSize = 256 << 20

// maxStoredChunk bounds a stored (compressed) chunk: zstd adds a little to
// what it cannot compress.
const maxStoredChunk = MaxChunkSize + MaxChunkSize/64

func chunkKey(hash string) string { return "chunks/" + hash[:2] + "/" + hash }

func runPrefix(runID string) string { return blob.RunPrefix(runID) + "checkpoints/" }

// ManifestKey is the blob key of a run's checkpoint.
func ManifestKey(runID string, seq int) string {
	return fmt.Sprintf("%s%08d.json", runPrefix(runID), seq)
}

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
}

// save runs one checkpoint: it takes the save lock, lets walk add the
// files, waits for the uploads and commits the manifest.
func (e *Engine) save(ctx context.Context, meta Meta, prev *Manifest, what string, walk func(s *saving) error) (*Manifest, error) {
	s := &saving{e: e, old: map[string]File{}, prev: map[string]File{}, m: &Manifest{Version: 2, Hash: "blake3", ChunkSize: e.ChunkSize, RunID: meta.RunID, Seq: meta.Seq,
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
		for _, f := range prev.Files {
			s.prev[f.Path] = f
			if !e.racy(time.Unix(0, f.MTime), prev.CreatedAt) {
				s.old[f.Path] = f
			}
		}
	}
	s.g, s.ctx = errgroup.WithContext(ctx)
	s.g.SetLimit(e.parallel())
	err = walk(s)
	if gerr := s.g.Wait(); err == nil {
		err = gerr
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s #%d of %s: %w", meta.RunID, meta.Seq, what, err)
	}
	s.m.NewBytes, s.m.NewChunks = s.newBytes.Load(), int(s.newChunks.Load())
	if err := e.commit(ctx, s.m); err != nil {
		return nil, err
	}
	return s.m, nil
}

type progressKey struct{}

// WithProgress makes the saves and restores run under ctx report each
// piece of file content they handle, in bytes, to fn; fn is called from
// several goroutines at once.
func WithProgress(ctx context.Context, fn func(bytes int64)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// report passes n handled bytes to ctx's progress function, if any.
func report(ctx context.Context, n int64) {
	if fn, ok := ctx.Value(progressKey{}).(func(int64)); ok && n > 0 {
		fn(n)
	}
}

// syncKnown forgets the chunks known to be stored when a GC (in this
// process or another) has deleted chunks since they were learnt. It runs
// under the save lock, which no GC runs beside, so the cache holds for
// the rest of the save.
func (e *Engine) syncKnown(ctx context.Context) error {
	gen := ""
	rc, err := e.Store.Get(ctx, gcGenerationKey)
	switch {
	case errors.Is(err, blob.ErrNotFound):
	case err != nil:
		return fmt.Errorf("read the GC generation: %w", err)
	default:
		b, err := io.ReadAll(io.LimitReader(rc, 64))
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("read the GC generation: %w", err)
		}
		gen = string(b)
	}
	e.knownMu.Lock()
	defer e.knownMu.Unlock()
	if gen != e.knownGen {
		e.known.Clear()
		e.knownGen = gen
	}
	return nil
}

// unchanged returns the previous checkpoint's chunks of f if they still
// describe it.
func (s *saving) unchanged(f File) ([]string, bool) {
	o, ok := s.old[f.Path]
	if ok && o.Size == f.Size && o.MTime == f.MTime && o.Mode == f.Mode {
		return o.Chunks, true
	}
	return nil, false
}

func (s *saving) add(f File) {
	s.m.Files = append(s.m.Files, f)
	s.m.Bytes += f.Size
}

// store hashes a chunk read into the pooled buffer bp, records its hash at
// chunks[i] (then calls done, if any) and stores the chunk unless the store
// or this save already has it. The buffer goes back to the pool.
func (s *saving) store(bp *[]byte, buf []byte, chunks []string, i int, done func()) error {
	defer s.e.bufs.Put(bp)
	h := chunkHash(buf)
	chunks[i] = h
	if done != nil {
		done()
	}
	_, stored := s.e.known.Load(h)
	if _, queued := s.inflight.LoadOrStore(h, struct{}{}); stored || queued {
		return nil
	}
	put, err := s.e.putChunk(s.ctx, h, buf)
	if err == nil && put {
		s.newBytes.Add(int64(len(buf)))
		s.newChunks.Add(1)
	}
	return err
}

// Save snapshots dir. prev, if given, lets files whose size and mtime did
// not change reuse their chunks without being read again.
func (e *Engine) Save(ctx context.Context, dir string, meta Meta, prev *Manifest) (*Manifest, error) {
	return e.save(ctx, meta, prev, dir, func(s *saving) error {
		inodes := map[[2]uint64]string{} // files with more than one link, by device and inode
		return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p != dir {
					return nil // deleted while walking: not part of this snapshot
				}
				return err
			}
			if s.ctx.Err() != nil {
				return s.ctx.Err()
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil || rel == "." {
				return err
			}
			if e.excluded(filepath.ToSlash(rel)) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			f := File{Path: filepath.ToSlash(rel), Mode: info.Mode()}
			switch {
			case info.Mode()&fs.ModeSymlink != 0:
				if f.Link, err = os.Readlink(p); err != nil {
					return err
				}
			case info.IsDir():
			case info.Mode().IsRegular():
				f.Size, f.MTime = info.Size(), info.ModTime().UnixNano()
				st, multi := info.Sys().(*syscall.Stat_t)
				multi = multi && st.Nlink > 1
				if multi {
					if first, seen := inodes[[2]uint64{st.Dev, st.Ino}]; seen {
						f.HardLink = first
						s.m.Files = append(s.m.Files, f)
						return nil
					}
				}
				var ok bool
				if f.Chunks, ok = s.unchanged(f); ok {
					report(ctx, f.Size)
				} else {
					f.Chunks, err = s.saveFile(p, info)
					if errors.Is(err, ErrTorn) {
						s.m.Unsettled = append(s.m.Unsettled, f.Path)
						old, had := s.prev[f.Path]
						if !had {
							return nil
						}
						f, err = old, nil
					}
					if err != nil {
						return fmt.Errorf("%s: %w", f.Path, err)
					}
				}
			default:
				return nil // sockets, fifos, devices are not workspace content
			}
			s.add(f)
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 && f.Mode.IsRegular() {
				inodes[[2]uint64{st.Dev, st.Ino}] = f.Path
			}
			return nil
		})
	})
}

// SeqTakenError: another attempt of the run committed this sequence
// number; a checkpoint never overwrites another attempt's.
type SeqTakenError struct{ Seq, Attempt int }

func (e *SeqTakenError) Error() string {
	return fmt.Sprintf("checkpoint #%d is attempt %d's", e.Seq, e.Attempt)
}

// excluded tells whether a snapshot path is one never saved.
func (e *Engine) excluded(rel string) bool {
	for _, g := range e.Exclude {
		if ok, _ := path.Match(g, rel); ok {
			return true
		}
	}
	return false
}

// commit writes the manifest: the checkpoint exists from here on. An
// attempt that a later one has fenced commits nothing. The manifest is
// created conditionally, so of two attempts racing for a sequence number
// one wins; the same attempt may write its number again (a retried save).
func (e *Engine) commit(ctx context.Context, m *Manifest) error {
	fs, err := e.fences(ctx, m.RunID)
	if err != nil {
		return fmt.Errorf("checkpoint %s #%d: %w", m.RunID, m.Seq, err)
	}
	if f := supersededBy(m.Attempt, 0, fs); f != nil {
		return &FencedError{Attempt: m.Attempt, By: f.Attempt}
	}
	body, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return fmt.Errorf("checkpoint %s #%d: encode manifest: %w", m.RunID, m.Seq, err)
	}
	key := ManifestKey(m.RunID, m.Seq)
	err = e.Store.Create(ctx, key, bytes.NewReader(body))
	if errors.Is(err, blob.ErrExists) {
		old, lerr := e.loadKey(ctx, key)
		switch {
		case lerr != nil:
			return fmt.Errorf("checkpoint %s #%d: %w", m.RunID, m.Seq, lerr)
		case old.Attempt != m.Attempt:
			return &SeqTakenError{Seq: m.Seq, Attempt: old.Attempt}
		}
		err = e.Store.Put(ctx, key, bytes.NewReader(body))
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s #%d: commit manifest: %w", m.RunID, m.Seq, err)
	}
	return nil
}

// errChanged means the file's size or mtime moved during the read.
var errChanged = errors.New("changed during read")

// saveFile reads a file in chunks and queues hashing and uploading of each;
// if the file changed meanwhile it is read again, and after three tries it
// is ErrTorn: a committed checkpoint never holds a torn file.
func (s *saving) saveFile(p string, before fs.FileInfo) ([]string, error) {
	e := s.e
	for try := 0; try < 3; try++ {
		// File times tick coarsely (a few ms): a file written within the
		// last moment can change without its mtime moving, so it is read
		// once more and must match chunk for chunk.
		check := e.racy(before.ModTime(), time.Now())
		chunks, sums, err := s.readChunks(p, before.Size(), check)
		if err != nil && !errors.Is(err, errChanged) {
			return nil, err
		}
		same := err == nil
		if same && check {
			again, err := e.quickSums(p, before.Size())
			if err != nil {
				return nil, err
			}
			same = slices.Equal(sums, again)
		}
		after, serr := os.Stat(p)
		if serr != nil {
			return nil, serr
		}
		if same && after.Size() == before.Size() && after.ModTime().Equal(before.ModTime()) {
			return chunks, nil
		}
		before = after
	}
	return nil, ErrTorn
}

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

// quickSums is a fast non-cryptographic checksum per chunk, read in
// parallel, only to tell whether a file changed between two reads.
func (e *Engine) quickSums(p string, size int64) ([]uint64, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	cs := int64(e.ChunkSize)
	sums := make([]uint64, (size+cs-1)/cs)
	var g errgroup.Group
	g.SetLimit(e.parallel())
	for i := range sums {
		g.Go(func() error {
			bp := e.getBuf()
			defer e.bufs.Put(bp)
			off := int64(i) * cs
			buf := (*bp)[:min(cs, size-off)]
			if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			sums[i] = xxhash.Sum64(buf)
			return nil
		})
	}
	return sums, g.Wait()
}

// readChunks reads a file's chunks in parallel (pread), hashes them
// (BLAKE3) and queues their compression and upload in the group. It
// returns once every chunk is read, with the chunk hashes and, if asked, a
// quick checksum per chunk; the uploads go on.
func (s *saving) readChunks(p string, size int64, withSums bool) ([]string, []uint64, error) {
	e := s.e
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
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
		bp := e.getBuf()
		off := int64(i) * cs
		buf := (*bp)[:min(cs, size-off)]
		// The read runs in the group too: chunks of a big file are read and
		// hashed on every core.
		s.g.Go(func() error {
			k, err := f.ReadAt(buf, off)
			if k < len(buf) {
				if err != nil && !errors.Is(err, io.EOF) {
					readErr.CompareAndSwap(nil, err)
				}
				short.Store(true)
				e.bufs.Put(bp)
				read.Done()
				return nil
			}
			report(s.ctx, int64(k))
			if withSums {
				sums[i] = xxhash.Sum64(buf)
			}
			if e.readHook != nil {
				e.readHook(p, i)
			}
			return s.store(bp, buf, chunks, i, read.Done)
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

func (e *Engine) getBuf() *[]byte {
	if bp, ok := e.bufs.Get().(*[]byte); ok && cap(*bp) >= e.ChunkSize {
		*bp = (*bp)[:e.ChunkSize]
		return bp
	}
	b := make([]byte, e.ChunkSize)
	return &b
}

// chunkHash names a chunk by the BLAKE3 hash of its content (about nine
// times faster than SHA-256 on machines without SHA extensions).
func chunkHash(b []byte) string {
	sum := blake3.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// putChunk stores a chunk unless the store already has it.
func (e *Engine) putChunk(ctx context.Context, h string, data []byte) (bool, error) {
	ok, err := e.Store.Exists(ctx, chunkKey(h))
	if err != nil {
		return false, fmt.Errorf("chunk %s: %w", h[:12], err)
	}
	if !ok {
		if err := e.Store.Put(ctx, chunkKey(h), bytes.NewReader(encoder.EncodeAll(data, nil))); err != nil {
			return false, fmt.Errorf("chunk %s: %w", h[:12], err)
		}
	}
	e.known.Store(h, struct{}{})
	return !ok, nil
}

// Restore writes a checkpoint's tree into dir, verifying every chunk hash.
func (e *Engine) Restore(ctx context.Context, m *Manifest, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("restore into %s: %w", dir, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.parallel())
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
		default:
			if err := e.restoreFile(gctx, g, m.ChunkSize, f, target); err != nil {
				_ = g.Wait()
				return fmt.Errorf("restore %s #%d: %w", m.RunID, m.Seq, err)
			}
		}
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

// restoreFile creates the file at its full size and queues one task per
// chunk (fetch, verify, write at its offset); the last one to finish sets
// mode and mtime and renames the file into place.
func (e *Engine) restoreFile(ctx context.Context, g *errgroup.Group, chunkSize int, f File, target string) error {
	// The file is written under a name no one can predict, created
	// exclusively, its mode and times set through its descriptor: nothing
	// another entry restores (a symlink of a guessed name) can redirect it.
	out, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".mlrb-*")
	if err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	tmp := out.Name()
	if err := out.Truncate(f.Size); err != nil {
		_ = out.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	finish := func() error {
		mt := syscall.NsecToTimeval(f.MTime)
		err := out.Chmod(f.Mode.Perm())
		if err == nil {
			err = syscall.Futimes(int(out.Fd()), []syscall.Timeval{mt, mt})
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, target)
		}
		if err != nil {
			_ = os.Remove(tmp)
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
		g.Go(func() error {
			data, err := e.readChunk(ctx, h)
			if err == nil {
				_, err = out.WriteAt(data, int64(i)*int64(chunkSize))
				written.Add(int64(len(data)))
				report(ctx, int64(len(data)))
			}
			if err != nil {
				_ = out.Close()
				_ = os.Remove(tmp)
				return fmt.Errorf("%s: %w", f.Path, err)
			}
			if left.Add(-1) > 0 {
				return nil
			}
			if n := written.Load(); n != f.Size {
				_ = out.Close()
				_ = os.Remove(tmp)
				return fmt.Errorf("%s: restored %d bytes, manifest says %d", f.Path, n, f.Size)
			}
			return finish()
		})
	}
	return nil
}

// CorruptChunkError names a chunk that is missing or fails its hash.
type CorruptChunkError struct {
	Hash   string
	Reason string
}

func (e *CorruptChunkError) Error() string {
	return fmt.Sprintf("chunk %s is %s", e.Hash, e.Reason)
}

func (e *Engine) readChunk(ctx context.Context, h string) ([]byte, error) {
	rc, err := e.Store.Get(ctx, chunkKey(h))
	if errors.Is(err, blob.ErrNotFound) {
		return nil, &CorruptChunkError{Hash: h, Reason: "missing"}
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	comp, err := io.ReadAll(io.LimitReader(rc, maxStoredChunk+1))
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", h, err)
	}
	if len(comp) > maxStoredChunk {
		return nil, &CorruptChunkError{Hash: h, Reason: "larger than any chunk"}
	}
	data, err := decoder.DecodeAll(comp, nil)
	if err != nil {
		return nil, &CorruptChunkError{Hash: h, Reason: "not valid zstd: " + err.Error()}
	}
	if chunkHash(data) != h {
		return nil, &CorruptChunkError{Hash: h, Reason: "corrupt (hash mismatch)"}
	}
	return data, nil
}

// ErrNoCheckpoint means a run has no committed checkpoint.
var ErrNoCheckpoint = errors.New("no committed checkpoint")

// manifestKeys lists a run's manifest keys, oldest first (the keys are
// zero-padded and the store lists them sorted).
func (e *Engine) manifestKeys(ctx context.Context, runID string) ([]string, error) {
	objs, err := e.Store.List(ctx, runPrefix(runID))
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", runID, err)
	}
	var keys []string
	for _, o := range objs {
		if _, err := strconv.Atoi(strings.TrimSuffix(path.Base(o.Key), ".json")); err == nil {
			keys = append(keys, o.Key)
		}
	}
	return keys, nil
}

// List returns a run's committed checkpoints, oldest first, with those a
// superseded attempt wrote marked.
func (e *Engine) List(ctx context.Context, runID string) ([]*Manifest, error) {
	keys, err := e.manifestKeys(ctx, runID)
	if err != nil {
		return nil, err
	}
	fs, err := e.fences(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]*Manifest, 0, len(keys))
	for _, k := range keys {
		m, err := e.loadKey(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("checkpoint of %s: %w", runID, err)
		}
		if f := supersededBy(m.Attempt, m.Seq, fs); f != nil {
			m.SupersededBy = f.Attempt
		}
		out = append(out, m)
	}
	return out, nil
}

// Latest reads a run's newest checkpoint that is the run's (not a
// superseded attempt's); ErrNoCheckpoint if it has none.
func (e *Engine) Latest(ctx context.Context, runID string) (*Manifest, error) {
	keys, err := e.manifestKeys(ctx, runID)
	if err != nil {
		return nil, err
	}
	fs, err := e.fences(ctx, runID)
	if err != nil {
		return nil, err
	}
	for i := len(keys) - 1; i >= 0; i-- {
		m, err := e.loadKey(ctx, keys[i])
		if err != nil {
			return nil, fmt.Errorf("checkpoint of %s: %w", runID, err)
		}
		if supersededBy(m.Attempt, m.Seq, fs) == nil {
			return m, nil
		}
	}
	return nil, fmt.Errorf("run %s: %w", runID, ErrNoCheckpoint)
}

// Load reads one committed manifest; a superseded attempt's is refused.
func (e *Engine) Load(ctx context.Context, runID string, seq int) (*Manifest, error) {
	m, err := e.loadKey(ctx, ManifestKey(runID, seq))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s #%d: %w", runID, seq, err)
	}
	fs, err := e.fences(ctx, runID)
	if err != nil {
		return nil, err
	}
	if f := supersededBy(m.Attempt, m.Seq, fs); f != nil {
		return nil, fmt.Errorf("checkpoint %s #%d: attempt %d %w after attempt %d took over from #%d", runID, seq, m.Attempt, ErrSuperseded, f.Attempt, f.FromSeq)
	}
	return m, nil
}

func (e *Engine) loadKey(ctx context.Context, key string) (*Manifest, error) {
	rc, err := e.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	var m Manifest
	if err := json.NewDecoder(rc).Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", key, err)
	}
	return &m, nil
}

func (e *Engine) parallel() int {
	if e.Parallel <= 0 {
		return 4
	}
	return e.Parallel
}
