package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/runs"
	"github.com/mlrb/mlrb/workflows"
)

// oneAtATime times o.seq no-op runs one after another on the idle server
// and worker, each after a run of the floor's shape on the same server:
// the two figures are of the same minutes, and their difference is what
// mlrb adds (its workflow's work, the agent's and the evaluator's
// processes, the checkpoint and its restore).
func oneAtATime(ctx context.Context, c client.Client, cfg *config.Config, o opts, in func(int64) workflows.RunInput) error {
	stopFloor, err := floorWorkers(c)
	if err != nil {
		return err
	}
	defer stopFloor()
	var seq, floor []time.Duration
	slowest, slowestTook := o.seq, time.Duration(0)
	for i := 0; i <= o.seq; i++ {
		f, err := floorRun(ctx, c, fmt.Sprintf("%sfloor-%d", o.prefix, i))
		if err != nil {
			return err
		}
		took, err := noopRun(ctx, c, cfg, fmt.Sprintf("%sseq-%d", o.prefix, i), in(int64(i)))
		if err != nil {
			return err
		}
		if i == 0 { // the first of each warms the caches
			continue
		}
		seq, floor = append(seq, took), append(floor, f)
		if took > slowestTook {
			slowest, slowestTook = i, took
		}
	}
	fmt.Printf("one run at a time, %d runs (%s, no-op agent): p50 %s  p99 %s  max %s\n", len(seq), o.task,
		pct(seq, 0.5), pct(seq, 0.99), pct(seq, 1))
	fmt.Printf("  Temporal alone, the same workflow shape on the same server, run for run: p50 %s  p99 %s  max %s; mlrb adds %s at p50\n",
		pct(floor, 0.5), pct(floor, 0.99), pct(floor, 1), pct(seq, 0.5)-pct(floor, 0.5))
	// The last, as a typical run, and the slowest, for the tail; then
	// the last floor run, step by step beside them.
	ids := []string{}
	for _, i := range slices.Compact([]int{o.seq, slowest}) {
		ids = append(ids, fmt.Sprintf("%sseq-%d", o.prefix, i))
	}
	for _, id := range append(ids, fmt.Sprintf("%sfloor-%d", o.prefix, o.seq)) {
		if err := timeline(ctx, c, id); err != nil {
			return err
		}
	}
	return nil
}

// noopRun runs one no-op run to its score and says how long it took.
func noopRun(ctx context.Context, c client.Client, cfg *config.Config, id string, in workflows.RunInput) (time.Duration, error) {
	t0 := time.Now()
	r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: cfg.Temporal.TaskQueue,
		TypedSearchAttributes: workflows.RunSearchAttributes(in)}, workflows.RunWorkflowName, in)
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", id, err)
	}
	var res runs.Result
	if err := r.Get(ctx, &res); err != nil {
		return 0, fmt.Errorf("%s: %w", id, err)
	}
	if res.Outcome != runs.OutcomeScored {
		return 0, fmt.Errorf("run %s ended %s: %s", id, res.Outcome, res.Reason)
	}
	return time.Since(t0), nil
}
