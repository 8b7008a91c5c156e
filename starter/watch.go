// `starter watch`: its flags and what it does.

package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/process/show"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/workflows"
)

// watchOptions are `starter watch`'s flags.
type watchOptions struct{ every time.Duration }

func (o *watchOptions) AddFlags(f *pflag.FlagSet) {
	f.DurationVar(&o.every, "refresh", time.Second, "how often the view is redrawn")
}

func (o watchOptions) check() error {
	if o.every <= 0 {
		return cli.Usagef("--refresh: %s must be positive", o.every)
	}
	return nil
}

func watchCmd() *cobra.Command {
	var o watchOptions
	cmd := &cobra.Command{
		Use:     "watch BENCH_ID|RUN_ID",
		Short:   "live progress of a benchmark or run (bars, budget left, checkpoint age), then its leaderboard or result",
		Args:    cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error { return o.check() },
		RunE:    run(func(g *globals, args []string) error { return runWatch(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runWatch redraws a run's or benchmark's progress until it ends, then
// prints its result or leaderboard.
func runWatch(g *globals, o watchOptions, id string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	info, err := describe(g.ctx, c, id)
	if err != nil {
		return err
	}
	bench := info.bench
	frame := runFrame
	if bench {
		frame = benchmarkFrame
	}
	tty := g.raw == os.Stdout && cli.IsTerminal(os.Stdout)
	for {
		busy, st, err := running(g.ctx, c, id)
		if err != nil {
			return err
		}
		if !busy && st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			hint := ""
			if bench {
				hint = fmt.Sprintf("; `starter benchmark resume %s` continues it", id)
			}
			return cli.Usagef("%s ended %s%s", id, show.StatusName(st), hint)
		}
		if !busy {
			break
		}
		var b strings.Builder
		// A query can fail while the workflow is between tasks or just
		// ended: show it and try again on the next tick.
		if err := frame(g.ctx, c, id, &b); err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
		if tty {
			fmt.Fprint(g.raw, "\033[H\033[2J")
		}
		fmt.Fprintln(g.out, b.String())
		select {
		case <-g.ctx.Done():
			return g.ctx.Err()
		case <-time.After(o.every):
		}
	}
	if bench {
		return awaitLeaderboard(g, c.GetWorkflow(g.ctx, id, ""), "table")
	}
	var res runs.Result
	if err := await(g, c.GetWorkflow(g.ctx, id, ""), &res); err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	withResearch(g, &res)
	return printResult(g.out, &res, false)
}

// benchSnapshot is a running benchmark as the watch and partial results
// see it: its progress and the status of the runs under way on the
// progress query's first page.
type benchSnapshot struct {
	prog workflows.Progress
	live map[string]workflows.Status
}

// snapshotBenchmark queries a benchmark's progress and, with live, the
// status of its runs under way.
func snapshotBenchmark(ctx context.Context, c client.Client, id string, live bool) (*benchSnapshot, error) {
	val, err := c.QueryWorkflow(ctx, id, "", workflows.QueryProgress)
	if err != nil {
		return nil, notFound(err, id)
	}
	s := &benchSnapshot{live: map[string]workflows.Status{}}
	if err := val.Get(&s.prog); err != nil {
		return nil, fmt.Errorf("decode progress of %s: %w", id, err)
	}
	if !live {
		return s, nil
	}
	for _, child := range s.prog.Running {
		// A run that just ended answers on the next tick.
		if st, err := queryStatus(ctx, c, child); err == nil {
			s.live[child] = st
		}
	}
	return s, nil
}

// outcomeAwaitingRetry stands in the leaderboard for the outcome of a run still
// waiting for an evaluation retry: not scored, so it counts as invalid.
const outcomeAwaitingRetry = runs.Outcome(runs.PhaseAwaitingEvalRetry)

// awaitingRetry are the runs waiting for an evaluation retry: until
// retried those count as invalid, never as 0.
func (s *benchSnapshot) awaitingRetry() []runs.Result {
	var out []runs.Result
	for _, id := range slices.Sorted(maps.Keys(s.live)) {
		if st := s.live[id]; st.Phase == runs.PhaseAwaitingEvalRetry {
			reason := "evaluation failed; `starter retry-eval` scores it in place"
			if wt := st.Waiting; wt != nil {
				reason = fmt.Sprintf("evaluation failed (%s); its log: `%s`; retry: `%s`", wt.Error, wt.Log, wt.Retry)
			}
			out = append(out, runs.Result{RunID: id, Task: st.Task, Agent: st.Agent, Seed: st.Seed,
				Outcome: outcomeAwaitingRetry, Reason: reason})
		}
	}
	return out
}

func benchmarkFrame(ctx context.Context, c client.Client, id string, w io.Writer) error {
	s, err := snapshotBenchmark(ctx, c, id, true)
	if err != nil {
		return err
	}
	show.WriteProgress(w, id, s.prog, s.live, time.Now())
	return nil
}

func runFrame(ctx context.Context, c client.Client, id string, w io.Writer) error {
	st, err := queryStatus(ctx, c, id)
	if err != nil {
		return err
	}
	show.WriteRun(w, st, time.Now())
	return nil
}
