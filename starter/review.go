// `starter review`: each run's flags, and `review mark` for verdicts.

package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/review"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
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

// reviewed is a run as the review lists it.
type reviewed struct {
	RunID   string        `json:"run_id"`
	Outcome runs.Outcome  `json:"outcome"`
	Score   *float64      `json:"score"`
	Flags   []review.Flag `json:"flags"`
	Verdict *runs.Verdict `json:"verdict,omitempty"`
	result  *runs.Result
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
	var all []reviewed
	for _, runID := range ids {
		rv, err := reviewRun(g, engine, cat, runID, cfg.Observe.MinExperiment, margin)
		if err != nil {
			return err
		}
		all = append(all, *rv)
	}
	slices.SortStableFunc(all, func(a, b reviewed) int { return len(b.Flags) - len(a.Flags) })
	if asJSON {
		enc := json.NewEncoder(g.out)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	flagged := 0
	for _, r := range all {
		if len(r.Flags) > 0 {
			flagged++
		}
		verdict := "no verdict"
		if v := r.Verdict; v != nil {
			verdict = fmt.Sprintf("verdict %s by %s at %s: %s", v.Verdict, v.By, v.At.UTC().Format(time.RFC3339), v.Note)
		}
		fmt.Fprintf(g.out, "%s  %s  %d flag(s)  (%s)\n", r.RunID, scoreText(r.result), len(r.Flags), verdict)
		for _, f := range r.Flags {
			fmt.Fprintf(g.out, "  %s: %s\n    evidence: %s\n", f.Kind, f.What, strings.Join(f.Evidence, "; "))
		}
	}
	fmt.Fprintf(g.out, "%d of %d run(s) flagged; flags are leads, not verdicts, and a run without one is not cleared: record a verdict with `starter review mark RUN_ID --verdict ok|hacked --note WHY`\n", flagged, len(all))
	return nil
}

// reviewRun computes one run's flags from what the store keeps of it.
func reviewRun(g *globals, engine *checkpoint.Engine, cat *tasks.Catalog, runID string, minExperiment time.Duration, margin float64) (*reviewed, error) {
	store := engine.Store
	var r runs.Result
	if err := runresults.Get(g.ctx, store, runID, &r); err != nil {
		return nil, err
	}
	spec, err := cat.Get(r.Task)
	if err != nil {
		return nil, err
	}
	obs, err := observe.Load(g.ctx, store, runID)
	if err != nil {
		return nil, err
	}
	in := review.Input{Result: &r, Spec: spec, Observations: obs, Experiments: runresults.Research(&r, obs, minExperiment).Experiments, Margin: margin,
		ReadFile: func(m *checkpoint.Manifest, p string, limit int64) ([]byte, error) {
			return engine.ReadFile(g.ctx, m, p, limit)
		}}
	if seq := r.FinalSeq(); seq > 0 {
		if in.Final, err = engine.Load(g.ctx, runID, seq); err != nil {
			return nil, err
		}
		all, err := engine.List(g.ctx, runID)
		if err != nil {
			return nil, err
		}
		for _, m := range all {
			if m.Seq < seq {
				in.Earlier = append(in.Earlier, m)
			}
		}
	}
	if err := transcript.Each(g.ctx, store, runID, 0, func(c transcript.Call) error { in.Refusals.Add(c); in.Downloads.Add(c); return nil }); err != nil {
		return nil, err
	}
	v, err := review.Latest(g.ctx, store, runID)
	if err != nil {
		return nil, err
	}
	return &reviewed{RunID: runID, Outcome: r.Outcome, Score: r.Score, Flags: review.Flags(in), Verdict: v, result: &r}, nil
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
