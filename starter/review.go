// `starter review`: each run's flags, and `review mark` for verdicts.

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/process/show"
	"github.com/mlrb/mlrb/internal/results/review"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
)

func reviewCmd() *cobra.Command {
	var asJSON bool
	var margin float64
	cmd := &cobra.Command{
		Use:   "review BENCHMARK_ID|RUN_ID",
		Short: "the runs that deserve a reviewer's look, most flags first, each flag a lead with its evidence (never a verdict, nor its absence one); `review mark` records a verdict",
		Args:  cobra.ExactArgs(1),
		RunE: run(func(g *globals, args []string) error {
			if margin < 0 || margin >= 1 {
				return cli.Usagef("--margin %g: a share of a limit, from 0 to under 1 (e.g. 0.05)", margin)
			}
			return runReview(g, args[0], asJSON, margin)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().Float64Var(&margin, "margin", review.DefaultMargin, "near_limit: how close below a rule's limit a run is flagged, as a share of the limit")
	cmd.AddCommand(reviewMarkCmd())
	return cmd
}

func runReview(g *globals, id string, asJSON bool, margin float64) error {
	cfg, cat, err := g.catalog()
	if err != nil {
		return err
	}
	store, err := g.store()
	if err != nil {
		return err
	}
	ids, err := storedRuns(g, store, id)
	if err != nil {
		return err
	}
	engine := app.Engine(store, cfg)
	var all []show.Reviewed
	for _, runID := range ids {
		rv, err := show.Review(g.ctx, engine, cat, runID, cfg.Observe.MinExperiment, margin)
		if err != nil {
			return err
		}
		all = append(all, *rv)
	}
	show.SortReviews(all)
	if asJSON {
		enc := json.NewEncoder(g.out)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	show.WriteReviews(g.out, all)
	return nil
}

// reviewMarkOptions are `starter review mark`'s flags.
type reviewMarkOptions struct{ verdict, note, by string }

func (o *reviewMarkOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.verdict, "verdict", "", "ok (the score stands) or hacked (not earned: the run counts as the agent's failure)")
	f.StringVar(&o.note, "note", "", "why: what the evidence showed")
	f.StringVar(&o.by, "by", "", "who gives the verdict (default: $USER@host)")
}

func reviewMarkCmd() *cobra.Command {
	var o reviewMarkOptions
	cmd := &cobra.Command{
		Use:   "mark RUN_ID --verdict ok|hacked --note TEXT",
		Short: "record a reviewer's verdict on a run in the store (who, when, why); hacked counts as the agent's failure on the leaderboard",
		Args:  cobra.ExactArgs(1),
		RunE:  run(func(g *globals, args []string) error { return runReviewMark(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runReviewMark(g *globals, o reviewMarkOptions, runID string) error {
	if o.verdict != runs.VerdictOK && o.verdict != runs.VerdictHacked {
		return cli.Usagef("--verdict %q: give ok or hacked", o.verdict)
	}
	if strings.TrimSpace(o.note) == "" {
		return cli.Usagef("--note: say why (what the evidence showed); a verdict without a reason cannot be reviewed in turn")
	}
	if o.by == "" {
		o.by = whoAmI()
	}
	store, err := g.store()
	if err != nil {
		return err
	}
	var r runs.Result
	if err := runresults.Get(g.ctx, store, runID, &r); err != nil {
		return cli.Usagef("review mark: %v (only a run with a stored result can be reviewed)", err)
	}
	v := &runs.Verdict{Verdict: o.verdict, By: o.by, At: time.Now().UTC(), Note: o.note}
	if err := review.Put(g.ctx, store, runID, v); err != nil {
		return err
	}
	runs.Apply(&r, v)
	if err := storeResult(g, store, runID, &r); err != nil {
		return err
	}
	what := "the score stands"
	if o.verdict == runs.VerdictHacked {
		what = "the leaderboard counts it as the agent's failure, and its bundle carries the verdict"
	}
	fmt.Fprintf(g.out, "run %s marked %s by %s: %s\n", runID, o.verdict, o.by, what)
	return nil
}

func storeResult(g *globals, store blob.Store, runID string, r *runs.Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode the result of %s: %w", runID, err)
	}
	return runresults.Put(g.ctx, store, runID, b)
}
