// The recorder: each call and connection kept, bodies bounded.

package transcript

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
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
	// MaxRecords bounds the records of the attempt (0: DefaultMaxRecords);
	// past it, calls the provider did not bill are counted, not
	// recorded, and Exceeded (if set) is told, once: the attempt is
	// stopped as the agent's failure naming gateway.max_records.
	MaxRecords int64
	Exceeded   func(why string)

	mu    sync.Mutex
	seq   int
	scrub *strings.Replacer
	// longest is the longest secret's length.
	longest int
	wg      sync.WaitGroup
	// stored are chunk hashes known to be in the store, the most recent
	// ones only (a hash forgotten is looked up in the store again).
	stored *lru.Cache[string, struct{}]
	// throttled counts the 429s since throttledAt, when the last one was
	// recorded: backpressure is recorded once a second at most.
	throttled   int
	throttledAt time.Time
	over        bool
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

// DefaultMaxRecords is gateway.max_records' default: a day's run makes
// a few thousand calls and connections.
const DefaultMaxRecords = 1_000_000

// MaxUnbilledBody is what is kept of each body of a call the provider
// billed nothing for (refused by the door, failed upstream): its head,
// with the whole body's size and hash. Such calls are free to the agent
// and unbounded in bytes; what the worker stores of them must not be.
const MaxUnbilledBody = 4 << 10

// Add numbers c and stores it with its bodies, in the background. What
// an attempt's calls cost the worker is bounded in bytes and records,
// whatever the agent sends: the bodies waiting to be stored (MaxPending:
// past it a call is recorded without them, saying so); an unbilled
// call's bodies (MaxUnbilledBody each, and a hash); backpressure (a 429
// is recorded once a second at most, counting the rest); the records
// waiting (MaxQueued) and those of the attempt (MaxRecords).
func (r *Recorder) Add(c Call, req, resp []byte) {
	if r.Seen != nil {
		r.Seen(c)
	}
	billed := c.billed()
	r.mu.Lock()
	r.setup()
	if !billed && c.Status == http.StatusTooManyRequests {
		now := time.Now()
		if r.throttled++; now.Sub(r.throttledAt) < time.Second {
			r.mu.Unlock()
			return
		}
		c.Count, r.throttled, r.throttledAt = r.throttled, 0, now
	}
	switch {
	case billed:
	case int64(r.seq) >= r.maxRecords():
		r.coalesced += max(c.Count, 1)
		if !r.over {
			r.over = true
			if r.Exceeded != nil {
				r.Exceeded(fmt.Sprintf("the agent's calls and connections made more than %d records, over gateway.max_records", r.maxRecords()))
			}
		}
		r.mu.Unlock()
		return
	case r.queued >= MaxQueued:
		r.coalesced += max(c.Count, 1)
		r.mu.Unlock()
		return
	}
	if !billed {
		req, resp = r.head(&c.Request, req), r.head(&c.Response, resp)
	}
	r.add(c, req, resp)
}

func (r *Recorder) maxRecords() int64 {
	if r.MaxRecords <= 0 {
		return DefaultMaxRecords
	}
	return r.MaxRecords
}

// head is what is kept of an unbilled call's body, a copy (the caller
// may reuse the body's buffer once Add returns): its first
// MaxUnbilledBody bytes with the run's secrets masked (a prefix long
// enough that no secret is cut in two is masked, never the whole body:
// a refused body may be 32 MiB), and its size and hash as sent noted in
// *b; r.mu is held.
func (r *Recorder) head(b **Body, body []byte) []byte {
	if len(body) <= MaxUnbilledBody {
		return bytes.Clone(body) // the caller may reuse its buffer
	}
	sum := blake3.Sum256(body)
	*b = &Body{Bytes: int64(len(body)), Truncated: true, BLAKE3: hex.EncodeToString(sum[:])}
	for w := MaxUnbilledBody + r.longest; ; w *= 2 {
		w = min(w, len(body))
		masked := r.scrub.Replace(string(body[:w]))
		if len(masked) >= MaxUnbilledBody+r.longest || w == len(body) {
			return []byte(masked[:min(len(masked), MaxUnbilledBody)])
		}
	}
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
			// Past gateway.max_records the count waits for Wait: a
			// summary per store round trip would be records without end.
			if r.coalesced > 0 && r.queued < MaxQueued/2 && !r.over {
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
			r.longest = max(r.longest, len(s))
		}
	}
	r.scrub = strings.NewReplacer(pairs...)
	r.slots = make(chan struct{}, storing)
	r.stored, _ = lru.New[string, struct{}](maxKnownChunks)
}

// maxKnownChunks bounds the chunk hashes a recorder remembers as stored
// (about 200 bytes each): a prompt's chunks repeat call after call, and
// one forgotten costs a lookup in the store, never a second copy.
const maxKnownChunks = 1 << 16

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
	why := fmt.Sprintf("%d records were waiting for the store", MaxQueued)
	if r.over {
		why = fmt.Sprintf("the attempt had made %d records (gateway.max_records)", r.maxRecords())
	}
	r.add(Call{Kind: KindLLM, Start: time.Now(), Usage: llm.Usage{Refused: int64(n)}, Count: n,
		Error: fmt.Sprintf("%d more calls and connections, refused or unbilled, counted but not recorded one by one: %s", n, why)}, nil, nil)
}

// flushThrottled records the 429s counted since the last one recorded;
// r.mu is held, and released.
func (r *Recorder) flushThrottled() {
	n := r.throttled
	r.throttled, r.throttledAt = 0, time.Now()
	r.add(Call{Kind: KindLLM, Start: time.Now(), Status: http.StatusTooManyRequests, Count: n,
		Error: fmt.Sprintf("%d more calls and connections answered 429 (backpressure), counted but not recorded one by one", n)}, nil, nil)
}

// Wait waits for every record added so far to be stored, those counted
// in one record included.
func (r *Recorder) Wait() {
	for {
		r.mu.Lock()
		switch {
		case r.throttled > 0:
			r.setup()
			r.flushThrottled()
		case r.coalesced > 0:
			r.flushCoalesced()
		default:
			r.mu.Unlock()
			r.wg.Wait()
			return
		}
		r.wg.Wait()
	}
}

func (r *Recorder) store(ctx context.Context, c *Call, req, resp []byte) error {
	for k, v := range c.Headers {
		c.Headers[k] = r.scrub.Replace(v)
	}
	for _, b := range []struct {
		body []byte
		out  **Body
	}{{req, &c.Request}, {resp, &c.Response}} {
		if b.body == nil {
			continue
		}
		kept, err := r.putBody(ctx, b.body)
		if err != nil {
			return err
		}
		if whole := *b.out; whole != nil {
			// Only the head of an unbilled body: its whole size and hash.
			kept.Bytes, kept.Truncated, kept.BLAKE3 = whole.Bytes, true, whole.BLAKE3
		}
		*b.out = kept
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
		if r.stored.Contains(h) {
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
		r.stored.Add(h, struct{}{})
	}
}
