// boardSource is where the starter reads a benchmark's board.

package main

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/board"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/gpucost"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/workflows"
)

// boardSource is where the starter reads a benchmark's board: Temporal
// for the benchmark and its runs, the blob store for their results.
type boardSource struct {
	g     *globals
	c     client.Client
	store blob.Store
	// followed: the store of a completed run without a stored result was
	// looked up (once: the first such run names where its runs wrote).
	followed bool
}

// Benchmark describes benchmark id from Temporal: its input (its runs),
// and its result once ended, or its progress while it runs.
func (s *boardSource) Benchmark(ctx context.Context, id string) (*board.Benchmark, error) {
	info, err := describe(ctx, s.c, id)
	if err != nil {
		return nil, err
	}
	if !info.bench {
		return nil, cli.Usagef("%s is a run, not a benchmark: `starter result %s` prints it (results, plan, report and export take benchmark ids; report takes a run too)", id, id)
	}
	b := &board.Benchmark{ID: id}
	if info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		snap, err := snapshotBenchmark(ctx, s.c, id, true)
		if err != nil {
			return nil, err
		}
		b.Running, b.Done, b.Total, b.Policy, b.Waiting = true, snap.prog.Done, snap.prog.Total, snap.prog.Policy, snap.awaitingRetry()
	} else {
		var res workflows.BenchmarkResult
		if err := s.c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			return nil, fmt.Errorf("benchmark %s: %w", id, err)
		}
		b.Setup, b.Carried = res.Setup, res.Runs
		if len(res.Runs) > 0 {
			return b, nil
		}
	}
	var in workflows.BenchmarkInput
	if err := startInput(ctx, s.c, id, &in); err != nil {
		return nil, err
	}
	b.Runs = in.ChildRuns(id)
	return b, nil
}

// Stored reads the results the runs stored.
func (s *boardSource) Stored(ctx context.Context, rs []runresults.Child) ([]*runs.Result, error) {
	return runresults.GetAll[runs.Result](ctx, s.store, rs, nil)
}

// Completed finds the result a store lacks of a run that did complete: a
// starter pointed at another store than the runs' would otherwise book
// every one as cut off. The first such run names its store: when it is
// not this starter's it is followed (a directory here) or the command is
// refused naming both; when it is, the result is read from Temporal,
// whose record of a completed run is whole.
func (s *boardSource) Completed(ctx context.Context, r runresults.Child) (*runs.Result, error) {
	info, err := describe(ctx, s.c, r.ID)
	if err != nil || info.Status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		return nil, nil // never started, or cut off: the rows say so
	}
	if !s.followed {
		s.followed = true
		cfg, err := s.g.config()
		if err != nil {
			return nil, err
		}
		if s.store, err = followStore(s.g, cfg, s.store, r.ID, storeOfRun(ctx, cfg, r.ID)); err != nil {
			return nil, err
		}
	}
	if got, err := runresults.GetAll[runs.Result](ctx, s.store, []runresults.Child{r}, nil); err == nil && got[0] != nil {
		return got[0], nil
	}
	var res runs.Result
	if err := s.c.GetWorkflow(ctx, r.ID, "").Get(ctx, &res); err != nil {
		return nil, fmt.Errorf("result of %s: %w", r.ID, err)
	}
	// Completed as the worker completes the results it stores.
	cfg, err := s.g.config()
	if err != nil {
		return nil, err
	}
	prices, err := gpucost.Load(cfg.Cost.GPUPrices)
	if err != nil {
		return nil, cli.Usagef("cost.gpu_prices: %v", err)
	}
	if err := runresults.Complete(ctx, s.store, &res, prices, cfg.Observe.MinExperiment); err != nil {
		return nil, err
	}
	return &res, nil
}
