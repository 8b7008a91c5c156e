// Package runresults keeps each run's result in the blob store, one
// object a run, so that a benchmark's results never travel through
// Temporal as one payload: a campaign of thousands of runs is read back
// from here by the leaderboard and the starter.
package runresults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/mlrb/mlrb/internal/blob"
)

// maxResult bounds a stored result read back: a run's result is a few
// kilobytes; anything past this is not one.
const maxResult = 4 << 20

// parallel is how many results are read at once.
const parallel = 16

// Key is where a run's result is stored.
func Key(runID string) string { return blob.RunPrefix(runID) + "result.json" }

// Put stores a run's result (JSON), replacing an earlier one: an
// evaluation retried in place stores the run's new result.
func Put(ctx context.Context, s blob.Store, runID string, result []byte) error {
	if !json.Valid(result) {
		return fmt.Errorf("result of %s is not JSON", runID)
	}
	if err := s.Put(ctx, Key(runID), bytes.NewReader(result)); err != nil {
		return fmt.Errorf("store result of %s: %w", runID, err)
	}
	return nil
}

// Get reads a run's stored result into v; blob.ErrNotFound when it has none.
func Get(ctx context.Context, s blob.Store, runID string, v any) error {
	rc, err := s.Get(ctx, Key(runID))
	if err != nil {
		return fmt.Errorf("result of %s: %w", runID, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxResult+1))
	if err != nil {
		return fmt.Errorf("read result of %s: %w", runID, err)
	}
	if len(b) > maxResult {
		return fmt.Errorf("result of %s is over %d bytes", runID, maxResult)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode result of %s: %w", runID, err)
	}
	return nil
}

// GetAll reads the stored results of ids, a few at a time, calling done
// after each (a heartbeat). Runs with no stored result are left out of
// the map and listed in missing.
func GetAll[T any](ctx context.Context, s blob.Store, ids []string, done func(n int)) (map[string]T, []string, error) {
	out := make(map[string]T, len(ids))
	var missing []string
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var v T
			err := Get(ctx, s, id, &v)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, blob.ErrNotFound):
				missing = append(missing, id)
			case err != nil:
				if first == nil {
					first = err
				}
			default:
				out[id] = v
			}
			if done != nil {
				done(len(out) + len(missing))
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, nil, first
	}
	return out, missing, nil
}
