package transcript

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/restic/chunker"
	"github.com/zeebo/blake3"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// MaxBody is what is kept of one body; the rest is counted, not stored.
const MaxBody = 64 << 20

// Chunk bounds: small enough that a prompt grown by one message shares
// all but its last chunks with the one before, large enough that a
// record's chunk list stays short.
const (
	minChunk    = 2 << 10
	maxChunk    = 64 << 10
	averageBits = 13 // about 8 KiB
)

// pol is the chunker's polynomial; fixed, so that every worker cuts the
// same body the same way and a chunk is stored once per run.
const pol = chunker.Pol(0x3DA3358B4DC173)

var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxChunk*2))
)

// Recorder writes one attempt's records, each in the background as its
// call ends (the agent never waits on the store); Wait waits for them.
type Recorder struct {
	Store   blob.Store
	RunID   string
	Attempt int
	// Redact are strings never stored (the run's secret values, the
	// attempt's token): replaced in every body and header.
	Redact []string
	// Ledger is the attempt's ledger now, stored with each record.
	Ledger func() llm.Ledger
	Log    *zap.Logger
	// Seen, if set, is told of each call as it is added (the attempt's
	// observation keeps when its calls ran); it must not block.
	Seen func(Call)

	mu     sync.Mutex
	seq    int
	scrub  *strings.Replacer
	wg     sync.WaitGroup
	stored sync.Map // chunk hashes known to be in the store
	// slots bounds the records stored at once: a thousand calls ending
	// together wait their turn, each holding only its bodies.
	slots chan struct{}
	// pending is the bytes of bodies waiting to be stored.
	pending int64
	// queued counts the records waiting to be stored; coalesced the
	// unbilled calls not recorded one by one while MaxQueued wait.
	queued, coalesced int
}

// MaxQueued bounds the records an attempt's recorder holds waiting for
// the store: a flood of refused calls (free to the agent, hundreds of
// thousands a minute) past it is counted in one record, not held in
// goroutines and memory. A call the provider billed is always recorded
// on its own (the gateway bounds those in flight).
const MaxQueued = 4096

// storing is how many records a recorder stores at once.
const storing = 8

// Add numbers c and stores it with its bodies, in the background. The
// bodies waiting to be stored are bounded (MaxPending): past it a call
// is recorded without them, saying so, rather than held in memory.
func (r *Recorder) Add(c Call, req, resp []byte) {
	if r.Seen != nil {
		r.Seen(c)
	}
	r.mu.Lock()
	if r.queued >= MaxQueued && !c.billed() {
		r.coalesced++
		r.mu.Unlock()
		return
	}
	r.add(c, req, resp)
}

// billed tells whether the provider charged for the call.
func (c *Call) billed() bool { return c.Usage.USD > 0 || c.Usage.Tokens != (llm.Tokens{}) }

// add numbers and stores c; r.mu is held, and released.
func (r *Recorder) add(c Call, req, resp []byte) {
	r.queued++
	r.seq++
	c.Seq, c.Attempt = r.seq, r.Attempt
	if r.Ledger != nil {
		c.Total = r.Ledger()
	}
	r.setup()
	size := int64(len(req) + len(resp))
	if r.pending+size > MaxPending {
		c.BodiesDropped = true
		req, resp, size = nil, nil, 0
	}
	r.pending += size
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			r.pending -= size
			r.queued--
			if r.coalesced > 0 && r.queued < MaxQueued/2 {
				r.flushCoalesced()
				return
			}
			r.mu.Unlock()
		}()
		r.slots <- struct{}{}
		defer func() { <-r.slots }()
		if err := r.store(context.Background(), &c, req, resp); err != nil && r.Log != nil {
			r.Log.Warn("call not recorded", zap.Int("seq", c.Seq), zap.Error(err))
		}
	}()
}

// MaxPending bounds the bodies an attempt's recorder holds waiting for
// the store.
const MaxPending = 64 << 20

func (r *Recorder) setup() {
	if r.scrub != nil {
		return
	}
	pairs := make([]string, 0, 2*len(r.Redact))
	for _, s := range r.Redact {
		if s != "" {
			pairs = append(pairs, s, "[REDACTED]")
		}
	}
	r.scrub = strings.NewReplacer(pairs...)
	r.slots = make(chan struct{}, storing)
}

// Scrub is s with the run's secrets and the attempt's token masked: what
// the worker logs of a call.
func (r *Recorder) Scrub(s string) string {
	r.mu.Lock()
	r.setup()
	r.mu.Unlock()
	return r.scrub.Replace(s)
}

// flushCoalesced records the calls counted, not recorded, so far as one
// record; r.mu is held, and released.
func (r *Recorder) flushCoalesced() {
	n := r.coalesced
	r.coalesced = 0
	r.add(Call{Kind: KindLLM, Start: time.Now(), Usage: llm.Usage{Refused: int64(n)},
		Error: fmt.Sprintf("%d more calls and connections, refused or unbilled, counted but not recorded one by one: %d records were waiting for the store", n, MaxQueued)}, nil, nil)
}

// Wait waits for every record added so far to be stored, those counted
// in one record included.
func (r *Recorder) Wait() {
	for {
		r.mu.Lock()
		if r.coalesced == 0 {
			r.mu.Unlock()
			r.wg.Wait()
			return
		}
		r.flushCoalesced()
		r.wg.Wait()
	}
}

func (r *Recorder) store(ctx context.Context, c *Call, req, resp []byte) error {
	for k, v := range c.Headers {
		c.Headers[k] = r.scrub.Replace(v)
	}
	var err error
	if req != nil {
		if c.Request, err = r.putBody(ctx, req); err != nil {
			return err
		}
	}
	if resp != nil {
		if c.Response, err = r.putBody(ctx, resp); err != nil {
			return err
		}
	}
	// What the agent chose (a model's name, a CONNECT's host) may carry a
	// secret of its run as well as any body.
	c.Error, c.Model, c.Served, c.Host = r.scrub.Replace(c.Error), r.scrub.Replace(c.Model), r.scrub.Replace(c.Served), r.scrub.Replace(c.Host)
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("record %d: %w", c.Seq, err)
	}
	if err := r.Store.Put(ctx, recordKey(r.RunID, r.Attempt, c.Seq), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("record %d: %w", c.Seq, err)
	}
	return nil
}

// putBody stores a body's chunks the store lacks and returns its list.
func (r *Recorder) putBody(ctx context.Context, body []byte) (*Body, error) {
	out := &Body{Bytes: int64(len(body))}
	if len(body) > MaxBody {
		body, out.Truncated = body[:MaxBody], true
	}
	body = []byte(r.scrub.Replace(string(body)))
	ch := chunker.NewWithBoundaries(bytes.NewReader(body), pol, minChunk, maxChunk)
	ch.SetAverageBits(averageBits)
	buf := make([]byte, maxChunk)
	for {
		c, err := ch.Next(buf)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("chunk a body: %w", err)
		}
		sum := blake3.Sum256(c.Data)
		h := hex.EncodeToString(sum[:])
		out.Chunks = append(out.Chunks, h)
		if _, ok := r.stored.Load(h); ok {
			continue
		}
		key := chunkKey(r.RunID, h)
		ok, err := r.Store.Exists(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("body chunk: %w", err)
		}
		if !ok {
			if err := r.Store.Put(ctx, key, bytes.NewReader(encoder.EncodeAll(c.Data, nil))); err != nil {
				return nil, fmt.Errorf("body chunk: %w", err)
			}
		}
		r.stored.Store(h, struct{}{})
	}
}
