// Chunks: BLAKE3-named, zstd-compressed, stored once.

package checkpoint

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"

	"github.com/mlrb/mlrb/internal/store/blob"
)

var (
	// No frame checksum: a chunk's content is checked by its BLAKE3 name.
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
	// A chunk never decodes past the largest chunk size (config allows
	// 256 MiB): a crafted chunk cannot make a restore allocate more.
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxChunkSize), zstd.WithDecoderMaxWindow(MaxChunkSize))
)

// MaxChunkSize bounds checkpoint.chunk_size, and so what one chunk may
// decode to.
const MaxChunkSize = 256 << 20

// MaxStoredChunk bounds a stored (compressed) chunk: zstd adds a little to
// what it cannot compress.
const MaxStoredChunk = MaxChunkSize + MaxChunkSize/64

// chunkHash names a chunk by the BLAKE3 hash of its content (about nine
// times faster than SHA-256 on machines without SHA extensions).
func chunkHash(b []byte) string {
	sum := blake3.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// askFirst is the size from which a chunk's upload is asked for first
// (HEAD, then PUT only if missing): below it the chunk is sent at once as
// a conditional write, one request instead of two, which on a workspace
// of many small files is what a checkpoint's time goes to; the body is
// sent again when it was stored, which a small chunk repays.
const askFirst = 1 << 20

// putChunk stores a chunk unless the store already has it, and says
// whether it stored it; it compresses into b's second buffer. ask: from
// askFirst on, ask the store first (a pack never is: it is new).
func (e *Engine) putChunk(ctx context.Context, h string, data []byte, b *chunkBuf, ask bool) (bool, error) {
	ask = ask && len(data) >= askFirst
	if ask {
		ok, err := e.Store.Exists(ctx, chunkKey(h))
		if err != nil {
			return false, fmt.Errorf("chunk %s: %w", h[:12], err)
		}
		if ok {
			e.known.Store(h, struct{}{})
			return false, nil
		}
	}
	b.comp.Reset()
	packed := encoder.EncodeAll(data, b.comp.AvailableBuffer())
	var err error
	if ask {
		err = e.Store.Put(ctx, chunkKey(h), bytes.NewReader(packed))
	} else {
		err = e.Store.Create(ctx, chunkKey(h), bytes.NewReader(packed))
	}
	stored := err == nil
	if errors.Is(err, blob.ErrExists) {
		err = nil
	}
	if err != nil {
		return false, fmt.Errorf("chunk %s: %w", h[:12], err)
	}
	e.known.Store(h, struct{}{})
	return stored, nil
}

// CorruptChunkError names a chunk that is missing or fails its hash.
type CorruptChunkError struct {
	Hash   string
	Reason string
}

func (e *CorruptChunkError) Error() string {
	return fmt.Sprintf("chunk %s is %s", e.Hash, e.Reason)
}

// chunkBuf is one chunk in flight: its content (read from a file, or
// decoded, aligned for a direct write) and its compressed form (to be
// stored, or as the store sent it). Saves and restores reuse a few of
// them (chunkBufs) rather than allocating two chunk-sized buffers per
// chunk, whose zeroing and collection cost a restore a quarter of its
// CPU; a sync.Pool would not do, as every collection empties it. A body
// the HTTP transport still sends after an early answer (an error) may
// see its buffer reused: the CRC32C the store checks refuses it.
type chunkBuf struct {
	comp bytes.Buffer
	data []byte
}

func newChunkBuf(chunkSize int) *chunkBuf {
	b := &chunkBuf{data: alignedBuf(chunkSize)}
	b.comp.Grow(chunkSize + chunkSize/64 + 64<<10)
	return b
}

// chunkBufs is a free list that keeps at most as many buffers as
// chunks move at once (storage.parallel): what a save or a restore holds
// is bounded by that many chunks, twice over.
type chunkBufs struct {
	free chan *chunkBuf
	size int
}

func newChunkBufs(parallel, chunkSize int) *chunkBufs {
	return &chunkBufs{free: make(chan *chunkBuf, parallel), size: chunkSize}
}

func (r *chunkBufs) get() *chunkBuf {
	select {
	case b := <-r.free:
		return b
	default:
		return newChunkBuf(r.size)
	}
}

func (r *chunkBufs) put(b *chunkBuf) {
	select {
	case r.free <- b:
	default:
	}
}

// readChunk fetches a chunk into b, decodes and verifies it; the content
// returned is b's until b is reused.
func (e *Engine) readChunk(ctx context.Context, h string, b *chunkBuf) ([]byte, error) {
	rc, err := e.Store.Get(ctx, chunkKey(h))
	if errors.Is(err, blob.ErrNotFound) {
		return nil, &CorruptChunkError{Hash: h, Reason: "missing"}
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return decodeChunk(rc, h, b)
}

// decodeChunk reads a stored chunk from r into b, decodes and verifies
// it against its hash h; the content returned is b's until b is reused.
func decodeChunk(r io.Reader, h string, b *chunkBuf) ([]byte, error) {
	b.comp.Reset()
	if _, err := b.comp.ReadFrom(io.LimitReader(r, MaxStoredChunk+1)); err != nil {
		return nil, fmt.Errorf("chunk %s: %w", h, err)
	}
	comp := b.comp.Bytes()
	if len(comp) > MaxStoredChunk {
		return nil, &CorruptChunkError{Hash: h, Reason: "larger than any chunk"}
	}
	data, err := decoder.DecodeAll(comp, b.data[:0])
	if err != nil {
		return nil, &CorruptChunkError{Hash: h, Reason: "not valid zstd: " + err.Error()}
	}
	if chunkHash(data) != h {
		return nil, &CorruptChunkError{Hash: h, Reason: "corrupt (hash mismatch)"}
	}
	return data, nil
}

// ChunkChecker checks stored chunks as a stream: one decoder, reused, so
// that a chunk is never held whole in memory.
type ChunkChecker struct{ dec *zstd.Decoder }

// NewChunkChecker makes a checker; Close releases it.
func NewChunkChecker() (*ChunkChecker, error) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(MaxChunkSize), zstd.WithDecoderMaxWindow(MaxChunkSize))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	return &ChunkChecker{dec: dec}, nil
}

// Close releases the decoder.
func (c *ChunkChecker) Close() { c.dec.Close() }

// Check reads a stored chunk from r to its end and tells whether it
// decodes to content of the given hash; it returns the stored size.
func (c *ChunkChecker) Check(r io.Reader, hash string) (int64, error) {
	cr := &countingReader{r: io.LimitReader(r, MaxStoredChunk+1)}
	if err := c.dec.Reset(cr); err != nil {
		return cr.n, &CorruptChunkError{Hash: hash, Reason: "not valid zstd: " + err.Error()}
	}
	h := blake3.New()
	if _, err := io.Copy(h, io.LimitReader(c.dec, MaxChunkSize+1)); err != nil {
		return cr.n, &CorruptChunkError{Hash: hash, Reason: "not valid zstd: " + err.Error()}
	}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return cr.n, err
	}
	switch {
	case cr.n > MaxStoredChunk:
		return cr.n, &CorruptChunkError{Hash: hash, Reason: "larger than any chunk"}
	case hex.EncodeToString(h.Sum(nil)) != hash:
		return cr.n, &CorruptChunkError{Hash: hash, Reason: "corrupt (hash mismatch)"}
	}
	return cr.n, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
