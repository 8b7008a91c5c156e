// oneAtATime times o.seq no-op runs one after another on the idle server and worker, each after a run of the floor's shape on the same server.

package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/run/runs"
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
	var seq, floor, adds []time.Duration
	slowest, slowestTook := o.seq, time.Duration(0)
	for i := 0; i <= o.seq; i++ {
		f, err := timed(ctx, c, client.StartWorkflowOptions{ID: fmt.Sprintf("%sfloor-%d", o.prefix, i), TaskQueue: floorQueue}, floorWorkflow, nil, nil)
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
		seq, floor, adds = append(seq, took), append(floor, f), append(adds, took-f)
		if took > slowestTook {
			slowest, slowestTook = i, took
		}
	}
	fmt.Printf("one run at a time, %d runs (%s, no-op agent): p50 %s  p99 %s  max %s\n", len(seq), o.task,
		pct(seq, 0.5), pct(seq, 0.99), pct(seq, 1))
	// What mlrb adds is the median of each run's difference from the
	// shape's run just before it: the pairs share the machine's minute.
	fmt.Printf("  Temporal alone, the same workflow shape on the same server, run for run: p50 %s  p99 %s  max %s; mlrb adds %s (median of the pairs)\n",
		pct(floor, 0.5), pct(floor, 0.99), pct(floor, 1), pct(adds, 0.5))
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
	var res runs.Result
	took, err := timed(ctx, c, client.StartWorkflowOptions{ID: id, TaskQueue: cfg.Temporal.TaskQueue,
		TypedSearchAttributes: workflows.RunSearchAttributes(in)}, workflows.RunWorkflowName, &res, in)
	if err == nil && res.Outcome != runs.OutcomeScored {
		err = fmt.Errorf("run %s ended %s: %s", id, res.Outcome, res.Reason)
	}
	return took, err
}

// timed runs a workflow to its end (its result into out, if not nil) and
// says how long that took from the start request.
func timed(ctx context.Context, c client.Client, start client.StartWorkflowOptions, workflow string, out any, args ...any) (time.Duration, error) {
	t0 := time.Now()
	r, err := c.ExecuteWorkflow(ctx, start, workflow, args...)
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", start.ID, err)
	}
	if err := r.Get(ctx, out); err != nil {
		return 0, fmt.Errorf("%s: %w", start.ID, err)
	}
	return time.Since(t0), nil
}
