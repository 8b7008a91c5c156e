// Command overhead measures what mlrb's orchestration costs per run: it
// starts the embedded server and a worker in-process, runs N mini runs
// with the no-op agent one after another, and prints the wall time per run
// (median, p90, max). The no-op agent submits at once, so the figure is
// the orchestration: workflow, lease, workspace, checkpoints, evaluator.
// With -seeds it then times a whole mini benchmark (7 tasks × seeds, no-op
// agent) through BenchmarkWorkflow, leaderboard included.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/agentcmd"
	"github.com/mlrb/mlrb/internal/app"
	"github.com/mlrb/mlrb/tasks"
	"github.com/mlrb/mlrb/workflows"
)

func main() {
	if agentcmd.RunIfAgent() {
		return
	}
	n := flag.Int("runs", 30, "runs to time")
	task := flag.String("task", "mini_baby_lm", "mini task")
	port := flag.Int("port", 17299, "embedded Temporal port")
	seeds := flag.Int("seeds", 5, "then time a mini benchmark with this many seeds per task (0: skip)")
	conc := flag.Int("concurrency", 8, "runs at once in the benchmark")
	flag.Parse()
	if err := run(*n, *task, *port, *seeds, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		os.Exit(1)
	}
}

func run(n int, task string, port, seeds, conc int) error {
	state, err := os.MkdirTemp("", "mlrb-overhead-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(state) }()
	cfg, err := config.Load("", nil, nil, nil)
	if err != nil {
		return err
	}
	cfg.Dev.StateDir, cfg.Dev.Port, cfg.Dev.UIPort = state, port, 0
	ctx := context.Background()
	logger := zap.NewNop()
	st, err := app.StartStack(ctx, cfg, logger, true, false)
	if err != nil {
		return err
	}
	defer st.Stop()
	c, pol := st.Client, app.Policy(cfg)
	var times []time.Duration
	for i := 0; i < n+1; i++ {
		start := time.Now()
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("overhead-%d", i), TaskQueue: cfg.Temporal.TaskQueue},
			workflows.RunWorkflowName, workflows.RunInput{Task: task, Agent: "noop", Seed: int64(i), Policy: pol})
		if err != nil {
			return err
		}
		var res workflows.RunResult
		if err := r.Get(ctx, &res); err != nil {
			return err
		}
		if res.Score == nil {
			return fmt.Errorf("run %d ended %s: %s", i, res.Outcome, res.Reason)
		}
		if i > 0 { // the first run warms caches
			times = append(times, time.Since(start))
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	pct := func(p float64) time.Duration { return times[int(p*float64(len(times)-1))] }
	fmt.Printf("orchestration overhead per run, no-op agent, %s, %d runs: median %s  p90 %s  max %s\n",
		task, len(times), pct(0.5).Round(time.Millisecond), pct(0.9).Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
	if seeds <= 0 {
		return nil
	}
	cat, err := tasks.Load("")
	if err != nil {
		return err
	}
	in := workflows.BenchmarkInput{Tasks: cat.IDs("mini"), Agents: []string{"noop"}, Concurrency: conc, Run: workflows.RunInput{Provider: "none", Policy: pol}}
	for s := 1; s <= seeds; s++ {
		in.Seeds = append(in.Seeds, int64(s))
	}
	start := time.Now()
	r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "overhead-benchmark", TaskQueue: cfg.Temporal.TaskQueue}, workflows.BenchmarkWorkflowName, in)
	if err != nil {
		return err
	}
	var res workflows.BenchmarkResult
	if err := r.Get(ctx, &res); err != nil {
		return err
	}
	wall := time.Since(start)
	scored := 0
	for _, run := range res.Runs {
		if run.Score != nil {
			scored++
		}
	}
	fmt.Printf("mini benchmark, no-op agent, %d tasks × %d seeds, %d at once: %d of %d runs scored, leaderboard stored, wall time %s\n",
		len(in.Tasks), seeds, conc, scored, len(res.Runs), wall.Round(time.Millisecond))
	return nil
}
