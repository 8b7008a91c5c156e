// observedLoad measures what observing agents costs their worker.

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/workflows"
)

// observedLoad measures what observing agents costs their worker: -observed
// idle agents (each waits out its budget) run at once, twice: observed at
// the default intervals, then with their processes sampled once an hour
// (so once) and no GPU query. Each phase has a fresh worker; its CPU is
// read over a window while every agent runs, its peak memory at the end.
func observedLoad(ctx context.Context, c client.Client, cfg *config.Config, pol workflows.Policy, o opts, state string) error {
	pol.NoCurve = true
	phases := []struct {
		name string
		env  []string
	}{
		{"observed (processes every 5 s)", nil},
		{"not observed (one sample an attempt)", []string{"MLRB_OBSERVE_PROC_INTERVAL=1h", "MLRB_OBSERVE_GPU_COMMAND=[]"}},
	}
	for i, ph := range phases {
		w, err := start("worker", ph.env, filepath.Join(state, fmt.Sprintf("worker-observed-%d.log", i)))
		if err != nil {
			return err
		}
		g, gctx := errgroup.WithContext(ctx)
		runs := make([]client.WorkflowRun, o.observed)
		for k := range runs {
			g.Go(func() error {
				var err error
				in := workflows.RunInput{Task: o.task, Agent: "idle", Seed: int64(k), TimeLimit: 90 * time.Second, Policy: pol}
				runs[k], err = c.ExecuteWorkflow(gctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%sobserved-%d-%d", o.prefix, i, k), TaskQueue: cfg.Temporal.TaskQueue,
					TypedSearchAttributes: workflows.RunSearchAttributes(in)}, workflows.RunWorkflowName, in)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			w.stop()
			return fmt.Errorf("start observed runs: %w", err)
		}
		// Every agent is up by then; the window ends well before their
		// deadline.
		time.Sleep(20 * time.Second)
		cpu0, _ := w.usage()
		const window = 40 * time.Second
		time.Sleep(window)
		cpu1, _ := w.usage()
		for _, r := range runs {
			if err := r.Get(ctx, nil); err != nil {
				w.stop()
				return fmt.Errorf("observed run %s: %w", r.GetID(), err)
			}
		}
		_, peak := w.usage()
		w.stop()
		fmt.Printf("%d idle agents at once, %s: worker %.1f%% of a core over %s, peak %.0f MiB resident\n", o.observed, ph.name,
			(cpu1-cpu0)/window.Seconds()*100, window, peak)
	}
	return nil
}
