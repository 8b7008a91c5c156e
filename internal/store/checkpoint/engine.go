// The checkpoint engine and its options.

// Package checkpoint snapshots a workspace into a blob store as
// content-addressed, zstd-compressed chunks plus one manifest per
// checkpoint. The manifest is written last: a checkpoint without its
// manifest does not exist, and its chunks are merely unreferenced.
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// Engine saves and restores checkpoints.
type Engine struct {
	Store blob.Store
	// ChunkSize, Parallel and RacyWindow are the Options New was given.
	ChunkSize  int
	Parallel   int
	RacyWindow time.Duration
	// Exclude are path globs (path.Match, against a file's path in the
	// snapshot) never saved: credentials a tool writes into the workspace.
	// A directory that matches is left out whole.
	Exclude []string
	// MaxEntries bounds a manifest's entries (Options.MaxEntries).
	MaxEntries int64
	// NoPacks: every file is stored in chunks of its own (Options.NoPacks).
	NoPacks bool
	// known holds hashes of chunks confirmed stored, so later checkpoints
	// skip even the existence check. It is good for one GC generation
	// (knownGen): a GC in any process may delete what it remembers.
	known    sync.Map
	knownMu  sync.Mutex
	knownGen string
	// bufs recycles the buffers of chunks at ChunkSize.
	bufs *chunkBufs
	// readHook, for tests, runs after each chunk is read, with the
	// file's path in the snapshot.
	readHook func(path string, chunk int)
}

// Options tune an engine; a zero value takes its default.
type Options struct {
	// ChunkSize cuts files into chunks (4 MiB: a changed region of a
	// weights file costs a few chunks, and a 20 GiB workspace ~5,000).
	ChunkSize int
	// Parallel bounds the chunk uploads and downloads in flight (8, as
	// storage.parallel: what keeps a local S3 server busy on two cores).
	Parallel int
	// RacyWindow is how recently a file may have changed for its mtime to
	// hide a change (DefaultRacyWindow).
	RacyWindow time.Duration
	// Exclude are path globs never saved (none).
	Exclude []string
	// MaxEntries bounds a manifest's entries (0: no bound): a workspace
	// with more is saved truncated (Manifest.Truncated), each entry a
	// line of the manifest whatever the agent made.
	MaxEntries int64
	// NoPacks stores every file in chunks of its own, as before packs
	// (pack.go): what a worker older than packs can restore.
	NoPacks bool
}

// New returns an engine over store, o's zero values defaulted.
func New(store blob.Store, o Options) *Engine {
	if o.ChunkSize <= 0 {
		o.ChunkSize = 4 << 20
	}
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	return &Engine{Store: store, ChunkSize: o.ChunkSize, Parallel: o.Parallel, RacyWindow: o.RacyWindow, Exclude: o.Exclude, MaxEntries: o.MaxEntries, NoPacks: o.NoPacks,
		bufs: newChunkBufs(max(1, o.Parallel), o.ChunkSize)}
}

// buffers are the chunk buffers for chunks of size: the engine's own,
// or a restore's of a manifest cut at another size.
func (e *Engine) buffers(size int) *chunkBufs {
	if size == e.ChunkSize {
		return e.bufs
	}
	return newChunkBufs(e.parallel(), size)
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

func (e *Engine) parallel() int { return max(1, e.Parallel) }
