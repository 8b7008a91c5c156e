package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/anchors"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/internal/leaderboard"
	"github.com/mlrb/mlrb/internal/runresults"
	"github.com/mlrb/mlrb/internal/runs"
	"github.com/mlrb/mlrb/workflows"
)

// resultsOptions are `starter results`'s flags.
type resultsOptions struct{ format string }

func (o *resultsOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.format, "format", "table", "table, md, csv, json or svg (a chart with error bars)")
}

func resultsCmd() *cobra.Command {
	var o resultsOptions
	cmd := &cobra.Command{
		Use:     "results BENCH_ID",
		Short:   "print a benchmark's leaderboard (table, md, csv, json or svg); partial while it runs",
		Args:    cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error { return checkFormat(o.format) },
		RunE:    run(func(g *globals, args []string) error { return runResults(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runResults prints a benchmark's leaderboard: partial while it runs.
func runResults(g *globals, o resultsOptions, id string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	busy, _, err := running(g.ctx, c, id)
	if err != nil {
		return err
	}
	if !busy {
		return awaitLeaderboard(g, c.GetWorkflow(g.ctx, id, ""), o.format)
	}
	snap, err := snapshotBenchmark(g.ctx, c, id, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.errOut, "benchmark %s is running: %d of %d runs done; the leaderboard holds those and the runs waiting for an evaluation retry (invalid until retried)\n",
		id, snap.prog.Done, snap.prog.Total)
	runs, err := storedRuns(g, id, false)
	if err != nil {
		return err
	}
	runs = append(runs, snap.awaitingRetry()...)
	setup, err := withAnchors(g, leaderboard.SetupOf(workflows.LeaderboardRuns(runs), snap.prog.Policy), runs)
	if err != nil {
		return err
	}
	return printLeaderboard(g.out, id, runs, setup, o.format)
}

func checkFormat(format string) error {
	if !slices.Contains(leaderboard.Formats, format) {
		return cli.Usagef("--format: %q is not one of %s", format, strings.Join(leaderboard.Formats, ", "))
	}
	return nil
}

// awaitLeaderboard waits for a benchmark (through its continues-as-new)
// and prints its leaderboard.
func awaitLeaderboard(g *globals, run client.WorkflowRun, format string) error {
	var res workflows.BenchmarkResult
	if err := run.Get(g.ctx, &res); err != nil {
		return fmt.Errorf("benchmark %s: %w", run.GetID(), err)
	}
	return printBenchmark(g, &res, format)
}

// printBenchmark prints an ended benchmark's leaderboard, from the results
// its runs stored (or, for a benchmark from before those, its own).
func printBenchmark(g *globals, res *workflows.BenchmarkResult, format string) error {
	runs := res.Runs
	if len(runs) == 0 {
		var err error
		if runs, err = storedRuns(g, res.BenchmarkID, true); err != nil {
			return err
		}
	}
	setup, err := withAnchors(g, res.Setup, runs)
	if err != nil {
		return err
	}
	return printLeaderboard(g.out, res.BenchmarkID, runs, setup, format)
}

// withAnchors gives the setup the anchors of the runs' tasks as they are
// now (the store's measurements, else the catalog's): anchors measured
// after a benchmark ended apply to its leaderboard too.
func withAnchors(g *globals, setup leaderboard.Setup, results []runs.Result) (leaderboard.Setup, error) {
	_, cat, err := g.catalog()
	if err != nil {
		return setup, err
	}
	store, err := g.store()
	if err != nil {
		return setup, err
	}
	ids := make([]string, len(results))
	for i, r := range results {
		ids[i] = r.Task
	}
	setup.Anchors, err = anchors.ForLeaderboard(g.ctx, store, cat, ids)
	return setup, err
}

// storedRuns reads the results a benchmark's runs stored in the blob
// store, in run order. Runs without one are left out while the benchmark
// runs (under way or queued); once it has ended they were cut off, and
// count as infra failures, as its leaderboard counts them.
func storedRuns(g *globals, id string, ended bool) ([]runs.Result, error) {
	c, err := g.client()
	if err != nil {
		return nil, err
	}
	var in workflows.BenchmarkInput
	if err := startInput(g.ctx, c, id, &in); err != nil {
		return nil, err
	}
	store, err := g.store()
	if err != nil {
		return nil, err
	}
	all := in.ChildRuns(id)
	got, err := runresults.GetAll[runs.Result](g.ctx, store, all, nil)
	if err != nil {
		return nil, fmt.Errorf("results of %s: %w", id, err)
	}
	return resultRows(id, all, got, ended), nil
}

// resultRows are the leaderboard's runs: the stored results, and, once
// the benchmark has ended, the runs without one as cut off.
func resultRows(id string, all []workflows.ChildRun, got []*runs.Result, ended bool) []runs.Result {
	rows := make([]runs.Result, 0, len(all))
	for i, r := range got {
		switch {
		case r != nil:
			rows = append(rows, *r)
		case ended:
			j := all[i]
			rows = append(rows, runs.Result{RunID: j.ID, Task: j.Task, Agent: j.Agent, Seed: j.Seed, Outcome: runs.OutcomeInfraFailed,
				Reason: fmt.Sprintf("cut off before it stored a result (`starter benchmark resume %s` continues it)", id)})
		}
	}
	return rows
}

func printLeaderboard(w io.Writer, id string, runs []runs.Result, setup leaderboard.Setup, format string) error {
	if err := leaderboard.Write(w, format, id, workflows.LeaderboardRuns(runs), setup); err != nil {
		return cli.Usagef("--format: %v", err)
	}
	if format != "table" {
		return nil
	}
	var invalid []string
	for _, r := range runs {
		if r.Score == nil {
			invalid = append(invalid, fmt.Sprintf("%s (%s: %s)", r.RunID, r.Outcome, r.Reason))
		}
	}
	if len(invalid) > 0 {
		fmt.Fprintf(w, "%d invalid, never averaged as 0:\n  %s\n", len(invalid), strings.Join(invalid, "\n  "))
	}
	return nil
}
