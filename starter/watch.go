// `starter watch`: its flags and what it does.

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/process/cli"
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
	bench := info.GetType().GetName() == workflows.BenchmarkWorkflowName
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
			return cli.Usagef("%s ended %s%s", id, statusName(st), hint)
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
	for _, id := range sortedKeys(s.live) {
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

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func benchmarkFrame(ctx context.Context, c client.Client, id string, w io.Writer) error {
	s, err := snapshotBenchmark(ctx, c, id, true)
	if err != nil {
		return err
	}
	writeProgress(w, id, s, time.Now())
	return nil
}

// writeProgressLine is a benchmark's progress in one line: a bar and the
// runs in each state (the demo's view).
func writeProgressLine(w io.Writer, p workflows.Progress) {
	states := map[runs.ChildState]int{}
	for _, per := range p.PerTask {
		for s, n := range per {
			states[s] += n
		}
	}
	var parts []string
	for _, s := range sortedKeys(states) {
		if n := states[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	fmt.Fprintf(w, "%s %d/%d  %s\n", bar(float64(p.Done)/float64(max(p.Total, 1)), 30), p.Done, p.Total, strings.Join(parts, ", "))
}

// writeProgress is a benchmark's progress as watch shows it: a bar per
// task and agent, then the runs under way.
func writeProgress(w io.Writer, id string, s *benchSnapshot, now time.Time) {
	p := s.prog
	fmt.Fprintf(w, "benchmark %s: %d of %d runs done\n\n", id, p.Done, p.Total)
	fmt.Fprintf(w, "%-40s %-24s %6s %7s %6s %6s\n", "task/agent", "progress", "queued", "running", "scored", "failed")
	for _, k := range sortedKeys(p.PerTask) {
		n := p.PerTask[k]
		total, scored := 0, n[runs.StateOf(runs.OutcomeScored)]+n[runs.StateOf(runs.OutcomeLimitReached)]
		for _, v := range n {
			total += v
		}
		done := total - n[runs.ChildQueued] - n[runs.ChildRunning]
		fmt.Fprintf(w, "%-40s %s %3d/%-3d %6d %7d %6d %6d\n", k, bar(float64(done)/float64(max(total, 1)), 16), done, total,
			n[runs.ChildQueued], n[runs.ChildRunning], scored, done-scored)
	}
	if len(s.live) > 0 {
		more := ""
		if p.RunningTotal > len(p.Running) {
			more = fmt.Sprintf(" (the first %d of %d)", len(p.Running), p.RunningTotal)
		}
		fmt.Fprintf(w, "\nunder way%s:\n", more)
	}
	for _, rid := range sortedKeys(s.live) {
		fmt.Fprintf(w, "  %s\n", liveLine(view(s.live[rid], now), s.live[rid]))
		writeWaiting(w, "    ", s.live[rid].Waiting)
	}
}

func runFrame(ctx context.Context, c client.Client, id string, w io.Writer) error {
	st, err := queryStatus(ctx, c, id)
	if err != nil {
		return err
	}
	v := view(st, time.Now())
	fmt.Fprintf(w, "run %s (%s, agent %s, seed %d)\n", id, st.Task, st.Agent, st.Seed)
	used := 1 - v.BudgetLeftS/max(st.Budget.GrantedS(), 1)
	fmt.Fprintf(w, "budget  %s %.1fs left of %.0fs\n", bar(used, 30), v.BudgetLeftS, st.Budget.GrantedS())
	fmt.Fprintf(w, "%s\n", liveLine(v, st))
	if v.CheckpointFailures > 0 {
		fmt.Fprintf(w, "checkpoint failing (%d in a row): %s\n", v.CheckpointFailures, v.CheckpointError)
	}
	writeWaiting(w, "", v.Waiting)
	return nil
}

// liveLine is one run under way: phase, attempt, budget left and how old
// its last checkpoint is (the work a crash now would cost).
func liveLine(v statusView, st workflows.Status) string {
	age := "no checkpoint yet"
	if v.LastCheckpointAgeS != nil {
		age = fmt.Sprintf("last checkpoint %.1fs ago", *v.LastCheckpointAgeS)
	}
	stale := ""
	if v.CheckpointStale {
		stale = " STALE"
	}
	return fmt.Sprintf("%-44s %-26s attempt %d  budget left %7.1fs  %d checkpoints, %s%s",
		st.RunID, v.Phase, v.Attempt, v.BudgetLeftS, v.Checkpoints, age, stale)
}

func bar(frac float64, width int) string {
	n := int(min(max(frac, 0), 1)*float64(width) + 0.5)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}
