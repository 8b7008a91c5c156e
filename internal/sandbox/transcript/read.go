// Reading a transcript back, record by record, bounded.

package transcript

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/zeebo/blake3"
	"golang.org/x/sync/errgroup"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// maxRecord bounds a record read back (its chunk list grows with its
// bodies: 64 MiB of 2 KiB chunks at most).
const maxRecord = 4 << 20

// Keys lists a run's record keys (attempt 0: every attempt's), in order
// of attempt and seq.
func Keys(ctx context.Context, store blob.Store, runID string, attempt int) ([]string, error) {
	prefix := runPrefix(runID)
	if attempt > 0 {
		prefix = attemptPrefix(runID, attempt)
	}
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list calls of %s: %w", runID, err)
	}
	var keys []string
	for _, o := range objs {
		if _, _, ok := parseKey(o.Key); ok && strings.HasPrefix(o.Key, prefix) && !strings.Contains(o.Key, "/chunks/") {
			keys = append(keys, o.Key)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		aa, as, _ := parseKey(a)
		ba, bs, _ := parseKey(b)
		if aa != ba {
			return aa - ba
		}
		return as - bs
	})
	return keys, nil
}

// Read reads the records under keys, several at once. A record too large
// or not a record is read as a call that says so (Unreadable): one bad
// record never hides the rest of a transcript.
func Read(ctx context.Context, store blob.Store, keys []string) ([]Call, error) {
	out := make([]Call, len(keys))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, k := range keys {
		g.Go(func() error {
			b, err := blob.ReadAll(ctx, store, k, maxRecord)
			if err == nil {
				err = json.Unmarshal(b, &out[i])
			}
			var e *blob.TooLargeError
			var se *json.SyntaxError
			var te *json.UnmarshalTypeError
			switch {
			case err == nil:
			case errors.As(err, &e) || errors.As(err, &se) || errors.As(err, &te):
				a, seq, _ := parseKey(k)
				out[i] = Call{Attempt: a, Seq: seq, Unreadable: true, Error: "record unreadable: " + err.Error()}
			default:
				return fmt.Errorf("call record %s: %w", k, err)
			}
			return nil
		})
	}
	return out, g.Wait()
}

// List reads a run's records (attempt 0: every attempt's), all held at
// once: for a reader that needs them together (Each holds a page).
func List(ctx context.Context, store blob.Store, runID string, attempt int) ([]Call, error) {
	keys, err := Keys(ctx, store, runID, attempt)
	if err != nil {
		return nil, err
	}
	return Read(ctx, store, keys)
}

// page is how many records Each holds at once.
const page = 256

// Each calls fn with each of a run's records in order (attempt 0: every
// attempt's), holding a page of them at a time: a transcript of a
// million records costs its keys, not its records.
func Each(ctx context.Context, store blob.Store, runID string, attempt int, fn func(Call) error) error {
	keys, err := Keys(ctx, store, runID, attempt)
	if err != nil {
		return err
	}
	for len(keys) > 0 {
		n := min(page, len(keys))
		calls, err := Read(ctx, store, keys[:n])
		if err != nil {
			return err
		}
		for _, c := range calls {
			if err := fn(c); err != nil {
				return err
			}
		}
		keys = keys[n:]
	}
	return nil
}

// Totals is the ledger of each attempt of a run before attempt `before`
// (0: all), from its last record: what those attempts spent, crashed ones
// included, up to their last recorded call.
func Totals(ctx context.Context, store blob.Store, runID string, before int) (map[int]llm.Ledger, error) {
	byAttempt := map[int][]string{}
	if before > 0 {
		// Each earlier attempt's own records only: never the run's body
		// chunks, nor a later attempt's.
		for a := 1; a < before; a++ {
			ks, err := Keys(ctx, store, runID, a)
			if err != nil {
				return nil, err
			}
			if len(ks) > 0 {
				byAttempt[a] = ks
			}
		}
	} else {
		keys, err := Keys(ctx, store, runID, 0)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			a, _, _ := parseKey(k)
			byAttempt[a] = append(byAttempt[a], k) // keys are in seq order
		}
	}
	out := map[int]llm.Ledger{}
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	for a, ks := range byAttempt {
		g.Go(func() error {
			// The last readable record holds the attempt's ledger.
			for i := len(ks) - 1; i >= 0; i-- {
				c, err := Read(ctx, store, ks[i:i+1])
				if err != nil {
					return err
				}
				if !c[0].Unreadable {
					mu.Lock()
					out[a] = c[0].Total
					mu.Unlock()
					return nil
				}
			}
			return nil
		})
	}
	return out, g.Wait()
}

// ReadBody reassembles a stored body, each chunk checked against its hash.
func ReadBody(ctx context.Context, store blob.Store, runID string, b *Body) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	var out []byte
	for _, h := range b.Chunks {
		if len(h) != 64 {
			return nil, fmt.Errorf("body chunk %q is not a hash", h)
		}
		comp, err := blob.ReadAll(ctx, store, chunkKey(runID, h), 2*maxChunk)
		if err != nil {
			return nil, err
		}
		data, err := decoder.DecodeAll(comp, nil)
		if err != nil {
			return nil, fmt.Errorf("body chunk %s: %w", h[:12], err)
		}
		sum := blake3.Sum256(data)
		if hex.EncodeToString(sum[:]) != h {
			return nil, fmt.Errorf("body chunk %s is corrupt (hash mismatch)", h[:12])
		}
		out = append(out, data...)
	}
	return out, nil
}
