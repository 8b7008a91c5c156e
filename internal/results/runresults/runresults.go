// Each run's result kept in the store, read back bounded.

// Package runresults names a benchmark's runs and keeps each run's
// result in the blob store, one object a run, so that a benchmark's
// results never travel through Temporal as one payload: a campaign of
// thousands of runs is read back from here by the leaderboard and the
// starter.
package runresults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/keys"
)

// maxResult bounds a stored result read back: a run's result is a few
// kilobytes; anything past this is not one.
const maxResult = 4 << 20

// parallel is how many results are read at once.
const parallel = 16

// Matrix names a benchmark's runs: every agent × task × seed. It is what
// payloads carry instead of run ids, whose list grows with the benchmark.
type Matrix struct {
	BenchmarkID string
	Agents      []string
	Tasks       []string
	Seeds       []int64
}

// Child is one run of a benchmark.
type Child struct {
	Agent, Task string
	Seed        int64
	ID          string
}

// Pair is the run's "task/agent": what a benchmark counts its runs by.
func (r Child) Pair() string { return r.Task + "/" + r.Agent }

// RunID is a benchmark run's deterministic id: starting the same
// benchmark twice never duplicates a run.
func RunID(benchmarkID, agent, task string, seed int64) string {
	return fmt.Sprintf("%s/%s/%s/s%d", benchmarkID, agent, task, seed)
}

// Runs lists the matrix's runs in the order a benchmark starts them.
func (m Matrix) Runs() []Child {
	runs := make([]Child, 0, len(m.Agents)*len(m.Tasks)*len(m.Seeds))
	for _, a := range m.Agents {
		for _, t := range m.Tasks {
			for _, s := range m.Seeds {
				runs = append(runs, Child{a, t, s, RunID(m.BenchmarkID, a, t, s)})
			}
		}
	}
	return runs
}

// Key is where a run's result is stored.
func Key(runID string) string { return keys.Result(runID) }

// Stored lists the runs of benchmarkID whose results the store holds,
// from the store alone (a benchmark's history may be gone from Temporal).
// A benchmark's run ids start "<benchmark>/", so their folders share one
// escaped prefix.
func Stored(ctx context.Context, s blob.Store, benchmarkID string) ([]string, error) {
	prefix := strings.TrimSuffix(blob.RunPrefix(benchmarkID+"/"), "/")
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list the runs of %s: %w", benchmarkID, err)
	}
	var ids []string
	for _, o := range objs {
		folder, ok := strings.CutSuffix(o.Key, "/result.json")
		if !ok || strings.Count(folder, "/") != 1 {
			continue
		}
		if id, err := url.PathUnescape(strings.TrimPrefix(folder, "runs/")); err == nil && Key(id) == o.Key {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Put stores a run's result (JSON), replacing an earlier one: a run
// that a resumed benchmark continues stores its new result.
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
	b, err := blob.ReadAll(ctx, s, Key(runID), maxResult)
	if err != nil {
		return fmt.Errorf("result of %s: %w", runID, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode result of %s: %w", runID, err)
	}
	return nil
}

// GetAll reads the stored results of children, a few at a time, calling
// done after each (a heartbeat). The result of children[i] is at [i]; nil
// where a run has none stored. A runs.Result comes with its latest
// verdict (CurrentVerdict).
func GetAll[T any](ctx context.Context, s blob.Store, children []Child, done func(n int)) ([]*T, error) {
	out := make([]*T, len(children))
	var mu sync.Mutex
	n := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i, r := range children {
		g.Go(func() error {
			var v T
			switch err := Get(gctx, s, r.ID, &v); {
			case err == nil:
				if res, ok := any(&v).(*runs.Result); ok {
					if _, err := CurrentVerdict(gctx, s, res); err != nil {
						return err
					}
				}
				out[i] = &v
			case !errors.Is(err, blob.ErrNotFound):
				return err
			}
			if done != nil {
				mu.Lock()
				n++
				done(n)
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
