// `starter plan`: its flags and what it does.

package main

import (
	"fmt"
	"math"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
)

// planOptions are `starter plan`'s flags.
type planOptions struct {
	delta, sigma float64
	from         []string
	mixed, json  bool
}

func (o *planOptions) AddFlags(f *pflag.FlagSet) {
	f.Float64Var(&o.delta, "delta", 0, "the difference in score to detect (e.g. 0.05)")
	f.StringSliceVar(&o.from, "from", nil, "benchmarks (pooled) whose runs give each task's σ (the paired σ of differences where agents share seeds)")
	addMixedFlag(f, &o.mixed)
	f.Float64Var(&o.sigma, "sigma", 0, "without --from: the σ of a task's scores to assume for every task")
	f.BoolVar(&o.json, "json", false, "print JSON")
}

func (o planOptions) check() error {
	switch {
	case !(o.delta > 0) || math.IsInf(o.delta, 0):
		return cli.Usagef("--delta: give the difference to detect, a positive number such as 0.05")
	case len(o.from) == 0 && !(o.sigma > 0):
		return cli.Usagef("give --from BENCH_ID (its runs give each task's σ) or --sigma S")
	case len(o.from) > 0 && o.sigma != 0:
		return cli.Usagef("--sigma: give it or --from, not both")
	}
	return nil
}

func planCmd() *cobra.Command {
	var o planOptions
	cmd := &cobra.Command{
		Use:     "plan --delta D [--from BENCH_ID[,BENCH_ID…] | --sigma S]",
		Short:   "seeds per task to detect a difference δ with 80 % power at α = 0.05 (paired t-test over shared seeds)",
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return o.check() },
		RunE:    run(func(g *globals, _ []string) error { return runPlan(g, o) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runPlan(g *globals, o planOptions) error {
	var plan []leaderboard.PlanRow
	if len(o.from) == 0 {
		plan = []leaderboard.PlanRow{{Task: "every task", Sigma: o.sigma, Source: "--sigma (σ of paired differences)", Paired: true, Need: leaderboard.PairedSeeds(o.sigma, o.delta)}}
	} else {
		b, err := loadCampaign(g, o.from, o.mixed)
		if err != nil {
			return err
		}
		plan = leaderboard.Plan(leaderboard.RunsOf(b.runs), b.setup.Anchors, o.delta)
	}
	if o.json {
		return printJSON(g.out, map[string]any{"delta": o.delta, "alpha": 0.05, "power": 0.8, "tasks": plan})
	}
	fmt.Fprintf(g.out, "seeds per agent to detect δ = %g with 80 %% power at α = 0.05: the least n with (t₀.₉₇₅ + t₀.₈)·σ/√n ≤ δ for a paired t-test over shared seeds (σ of the differences), ·√2 for two samples\n", o.delta)
	fmt.Fprintf(g.out, "%-28s %8s %6s %10s %7s  %s\n", "task", "σ", "seeds", "MDD now", "needed", "σ from")
	for _, r := range plan {
		need, mdd, sigma := "?", "", ""
		if r.Need > 0 {
			need, sigma = fmt.Sprint(r.Need), fmt.Sprintf("%.4f", r.Sigma)
		}
		if r.Seeds >= 2 {
			mdd = fmt.Sprintf("%.4f", r.MDD)
		}
		fmt.Fprintf(g.out, "%-28s %8s %6d %10s %7s  %s\n", r.Task, sigma, r.Seeds, mdd, need, r.Source)
	}
	return nil
}
