// `starter export`: its flags and what it does.

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/export"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/tasks"
)

// exportOptions are `starter export`'s flags.
type exportOptions struct {
	format, out   string
	schema, mixed bool
	// org and relationship are who publishes an eee export, and how it
	// relates to the agents.
	org, relationship string
}

func (o *exportOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.format, "format", "parquet", "parquet or csv: one file per table; eee: the leaderboard as Every Eval Ever (v"+export.EEEVersion+") records, one per agent")
	f.StringVar(&o.org, "org", "", "eee: the organization publishing the results (default: $USER@host)")
	f.StringVar(&o.relationship, "relationship", "other", "eee: the publisher's relation to the agents: "+strings.Join(export.Relationships, ", "))
	f.StringVarP(&o.out, "output", "o", "", "directory to write the tables to")
	f.BoolVar(&o.schema, "schema", false, "print the tables' schema (Markdown) and exit")
	addMixedFlag(f, &o.mixed)
}

func (o exportOptions) check(args []string) error {
	switch {
	case o.schema:
		return nil
	case len(args) == 0:
		return cli.Usagef("give BENCH_ID (several are pooled)")
	case o.out == "":
		return cli.Usagef("-o: give the directory to write the tables to")
	}
	if !slices.Contains(export.Formats, o.format) && o.format != formatEEE {
		return cli.Usagef("--format: %q is not one of %s, %s", o.format, strings.Join(export.Formats, ", "), formatEEE)
	}
	if !slices.Contains(export.Relationships, o.relationship) {
		return cli.Usagef("--relationship: %q is not one of %s", o.relationship, strings.Join(export.Relationships, ", "))
	}
	return nil
}

func exportCmd() *cobra.Command {
	var o exportOptions
	cmd := &cobra.Command{
		Use:     "export BENCH_ID [BENCH_ID…] --format parquet|csv|eee -o DIR",
		Short:   "write benchmarks' runs, attempts, checkpoints, curve marks, LLM calls and scores as tables for notebooks (several benchmarks pooled)",
		PreRunE: func(_ *cobra.Command, args []string) error { return o.check(args) },
		RunE: run(func(g *globals, args []string) error {
			if o.schema {
				writeSchema(g.out)
				return nil
			}
			if o.format == formatEEE {
				return runExportEEE(g, o, args)
			}
			return runExport(g, o, args)
		}),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runExport writes a benchmark's tables: each run's result, then its
// calls read from its transcript run by run, so that memory holds one
// run's calls at a time.
func runExport(g *globals, o exportOptions, ids []string) error {
	b, err := loadCampaign(g, ids, o.mixed)
	if err != nil {
		return err
	}
	rs := b.runs
	cfg, err := g.config()
	if err != nil {
		return err
	}
	store, err := g.store()
	if err != nil {
		return err
	}
	w, err := export.Open(o.out, o.format)
	if err != nil {
		return err
	}
	calls := 0
	for i := range rs {
		if err := w.Result(rs[i].Benchmark, &rs[i]); err != nil {
			_ = w.Close()
			return err
		}
		if err := transcript.Each(g.ctx, store, rs[i].RunID, 0, func(c transcript.Call) error {
			calls++
			return w.Calls(rs[i].RunID, []transcript.Call{c})
		}); err != nil {
			_ = w.Close()
			return fmt.Errorf("calls of %s: %w", rs[i].RunID, err)
		}
		obs, err := observe.Load(g.ctx, store, rs[i].RunID)
		if err != nil {
			_ = w.Close()
			return err
		}
		if err := w.Research(&rs[i], runresults.Research(&rs[i], obs, cfg.Observe.MinExperiment), obs); err != nil {
			_ = w.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	fmt.Fprintf(g.out, "exported %d runs and %d calls of %s to %s (%s; schema.json beside)\n", len(rs), calls, strings.Join(ids, ", "), o.out, o.format)
	return nil
}

// writeSchema prints the export's tables as docs/use/results.md documents them.
func writeSchema(w io.Writer) {
	fmt.Fprintf(w, "Schema version %d.\n\n| table | column | type | meaning |\n|---|---|---|---|\n", export.SchemaVersion)
	for _, t := range export.Schema() {
		for _, c := range t.Columns {
			fmt.Fprintf(w, "| %s | `%s` | %s | %s |\n", t.Name, c.Name, c.Type, c.Doc)
		}
	}
}

// formatEEE is the Every Eval Ever export.
const formatEEE = "eee"

// runExportEEE writes the benchmarks' leaderboard as Every Eval Ever
// records: one per agent, one result per task.
func runExportEEE(g *globals, o exportOptions, ids []string) error {
	b, err := loadCampaign(g, ids, o.mixed)
	if err != nil {
		return err
	}
	_, cat, err := g.catalog()
	if err != nil {
		return err
	}
	board := leaderboard.Build(leaderboard.RunsOf(b.runs), b.setup)
	specs := map[string]*tasks.Spec{}
	for _, r := range board.Rows {
		if s, err := cat.Get(r.Task); err == nil {
			specs[r.Task] = s
		}
	}
	if o.org == "" {
		o.org = whoAmI()
	}
	files, err := export.WriteEEE(o.out, export.EEE{Benchmarks: ids, Rows: board.Rows, Runs: b.runs, Specs: specs, Organization: o.org,
		Relationship: o.relationship, Version: app.Version(), Now: time.Now()})
	if err != nil {
		return err
	}
	fmt.Fprintf(g.out, "exported %s as %d Every Eval Ever (v%s) record(s) to %s\n", strings.Join(ids, ", "), len(files), export.EEEVersion, o.out)
	return nil
}
