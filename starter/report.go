// `starter report`: its flags and what it does.

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/report"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// reportOptions are `starter report`'s flags.
type reportOptions struct {
	out    string
	bodies int
	mixed  bool
}

func (o *reportOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVarP(&o.out, "output", "o", "", "directory to write the report to (open its index.html)")
	addMixedFlag(f, &o.mixed)
	f.IntVar(&o.bodies, "bodies", 0, "keep this many bytes of each LLM call's request and response in the report (0: none; `starter calls` prints them whole)")
}

func (o reportOptions) check() error {
	switch {
	case o.out == "":
		return cli.Usagef("-o: give the directory to write the report to")
	case o.bodies < 0:
		return cli.Usagef("--bodies: %d must be 0 or more", o.bodies)
	}
	return nil
}

func reportCmd() *cobra.Command {
	var o reportOptions
	cmd := &cobra.Command{
		Use:     "report BENCH_ID [BENCH_ID…] | RUN_ID -o DIR",
		Short:   "write a static report (opens from disk): leaderboard with intervals and gap closed, score-over-time curves, a page per run with its timeline, checkpoints, log and LLM calls",
		Args:    cobra.MinimumNArgs(1),
		PreRunE: func(*cobra.Command, []string) error { return o.check() },
		RunE:    run(func(g *globals, args []string) error { return runReport(g, o, args) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runReport(g *globals, o reportOptions, ids []string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	id := ids[0]
	info, err := describe(g.ctx, c, id)
	if err != nil {
		return err
	}
	var rs []runs.Result
	var setup leaderboard.Setup
	var partial []string
	if info.run {
		if len(ids) > 1 {
			return cli.Usagef("%s is a run: report one run alone, or give benchmark ids only", id)
		}
		if busy, _, _ := running(g.ctx, c, id); busy {
			return cli.Usagef("run %s is still running: report it when it has ended (`starter result %s --wait`)", id, id)
		}
		var r runs.Result
		if err := c.GetWorkflow(g.ctx, id, "").Get(g.ctx, &r); err != nil {
			return fmt.Errorf("run %s: %w", id, err)
		}
		rs = []runs.Result{r}
		if setup, err = withAnchors(g, setup, rs); err != nil {
			return err
		}
	} else {
		b, err := loadCampaign(g, ids, o.mixed)
		if err != nil {
			return err
		}
		rs, setup, partial = b.runs, b.setup, b.partial
	}
	title := strings.Join(ids, " + ")
	cfg, err := g.config()
	if err != nil {
		return err
	}
	store, err := g.store()
	if err != nil {
		return err
	}
	in := report.Input{Title: title, Results: rs, Setup: setup, Store: store, Bodies: o.bodies, Version: app.Version(), Generated: time.Now(), Partial: partial,
		MinExperiment: cfg.Observe.MinExperiment,
		Progress: func(done, total int) {
			if done%50 == 0 || done == total {
				fmt.Fprintf(g.errOut, "report: %d of %d runs\n", done, total)
			}
		}}
	if err := report.Write(g.ctx, o.out, in); err != nil {
		return err
	}
	fmt.Fprintf(g.out, "report of %s (%d runs): %s\n", title, len(rs), filepath.Join(o.out, "index.html"))
	return nil
}
