// `starter results`: its flags and what it does.

package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/process/show"
	"github.com/mlrb/mlrb/internal/results/anchors"
	"github.com/mlrb/mlrb/internal/results/board"
	"github.com/mlrb/mlrb/internal/results/campaign"
	"github.com/mlrb/mlrb/internal/results/certificate"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// resultsOptions are `starter results`'s flags.
type resultsOptions struct {
	format, prices    string
	mixed, provenance bool
}

func (o *resultsOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.format, "format", "table", "table, md, csv, json or svg (a chart with error bars)")
	f.StringVar(&o.prices, "prices", "", "cost the runs' LLM calls again under this price table (gateway.prices format) instead of the one each run was costed with")
	f.BoolVar(&o.provenance, "provenance", false, "with the table: where each anchor comes from (its runs and evaluator digests)")
	addMixedFlag(f, &o.mixed)
}

// addMixedFlag is --allow-mixed of the commands that pool benchmarks.
func addMixedFlag(f *pflag.FlagSet, mixed *bool) {
	f.BoolVar(mixed, "allow-mixed", false, "pool benchmarks whose runs differ in task spec, evaluator or agent definition, each variant shown apart")
}

func resultsCmd() *cobra.Command {
	var o resultsOptions
	cmd := &cobra.Command{
		Use:     "results BENCH_ID [BENCH_ID…]",
		Short:   "print the leaderboard of a benchmark, or of several pooled by task, agent and seed (table, md, csv, json or svg); partial while they run",
		Args:    cobra.MinimumNArgs(1),
		PreRunE: func(*cobra.Command, []string) error { return checkFormat(o.format) },
		RunE:    run(func(g *globals, args []string) error { return runResults(g, o, args) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runResults prints the leaderboard of benchmarks: partial while they run.
func runResults(g *globals, o resultsOptions, ids []string) error {
	var prices *llm.Prices
	if o.prices != "" {
		var err error
		if prices, err = llm.LoadPrices(o.prices); err != nil {
			return cli.Usagef("--prices: %v", err)
		}
	}
	b, err := loadCampaign(g, ids, o.mixed)
	if err != nil {
		return err
	}
	if prices != nil {
		if b.runs, err = show.Recosted(b.runs, prices); err != nil {
			return cli.Usagef("--prices: %v", err)
		}
	}
	if o.format == "table" || o.format == "md" {
		for _, p := range b.partial {
			fmt.Fprintf(g.out, "PARTIAL: %s\n", p)
		}
	}
	b.setup.Terse = !o.provenance
	return printLeaderboard(g.out, strings.Join(ids, " + "), b.runs, b.setup, o.format)
}

// shown is what the read side gives a command: the runs, the setup they
// ran under and, for benchmarks still running, what is not done yet.
type shown struct {
	runs    []runs.Result
	setup   leaderboard.Setup
	partial []string
}

// loadCampaign is the runs and setup of one or more benchmarks, pooled by
// task, agent and seed (see campaign.Pool); a pool of runs that are not
// one experiment is refused unless mixed.
func loadCampaign(g *globals, ids []string, mixed bool) (shown, error) {
	if err := checkDistinct("BENCH_ID", ids); err != nil {
		return shown{}, err
	}
	sets := make([]campaign.Set, 0, len(ids))
	var partial []string
	for _, id := range ids {
		b, err := loadBoard(g, id)
		if err != nil {
			return shown{}, err
		}
		sets = append(sets, campaign.Set{ID: id, Results: b.runs, Setup: b.setup})
		partial = append(partial, b.partial...)
	}
	for _, note := range partial {
		fmt.Fprintln(g.errOut, note)
	}
	p, err := campaign.Pool(sets, mixed)
	var ce *campaign.ConflictError
	if errors.As(err, &ce) {
		return shown{}, cli.Usagef("%v", err)
	}
	if err != nil {
		return shown{}, err
	}
	for _, c := range p.Conflicts {
		fmt.Fprintf(g.errOut, "warning: %s\n", c)
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(g.errOut, "warning: %s\n", w)
	}
	setup, err := withAnchors(g, p.Setup, p.Results)
	return shown{runs: p.Results, setup: setup, partial: partial}, err
}

// loadBoard is a benchmark's runs and setup (without anchors: the pool
// adds them once): so far, while it runs.
func loadBoard(g *globals, id string) (shown, error) {
	c, err := g.client()
	if err != nil {
		return shown{}, err
	}
	store, err := g.store()
	if err != nil {
		return shown{}, err
	}
	b, err := board.Of(g.ctx, &boardSource{g: g, c: c, store: store}, id)
	return shown{runs: b.Runs, setup: b.Setup, partial: b.Partial}, err
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
	if err := await(g, run, nil); err != nil {
		return fmt.Errorf("benchmark %s: %w", run.GetID(), err)
	}
	return printBenchmark(g, run.GetID(), format)
}

// printBenchmark prints an ended benchmark's leaderboard, as results
// builds it.
func printBenchmark(g *globals, id, format string) error {
	b, err := loadBoard(g, id)
	if err != nil {
		return err
	}
	setup, err := withAnchors(g, b.setup, b.runs)
	if err != nil {
		return err
	}
	setup.Terse = true
	return printLeaderboard(g.out, id, b.runs, setup, format)
}

// withAnchors gives the setup the anchors of the runs' tasks as they are
// now (the store's measurements, else the catalog's): anchors measured
// after a benchmark ended apply to its leaderboard too; and so do the
// agents' certificates.
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
	setup.Certified = certificate.Lines(g.ctx, store, results)
	setup.Anchors, err = anchors.ForLeaderboard(g.ctx, store, cat, ids)
	return setup, err
}

// printLeaderboard prints a leaderboard (show.WriteLeaderboard); a
// format it does not know is the user's error.
func printLeaderboard(w io.Writer, id string, rs []runs.Result, setup leaderboard.Setup, format string) error {
	if err := show.WriteLeaderboard(w, id, rs, setup, format); err != nil {
		return cli.Usagef("--format: %v", err)
	}
	return nil
}
