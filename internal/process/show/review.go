// `starter review`: each stored run's flags assembled from what the store keeps of it, and the review printed.

package show

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/review"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

// Reviewed is one run's review: its flags and its latest verdict.
type Reviewed struct {
	RunID   string        `json:"run_id"`
	Outcome runs.Outcome  `json:"outcome"`
	Score   *float64      `json:"score"`
	Flags   []review.Flag `json:"flags"`
	Verdict *runs.Verdict `json:"verdict,omitempty"`
}

// Review computes one run's flags from what the store keeps of it: its
// result, its final and earlier checkpoints, what the host observed, its
// calls' transcript; and reads its latest verdict.
func Review(ctx context.Context, engine *checkpoint.Engine, cat *tasks.Catalog, runID string, minExperiment time.Duration, margin float64) (*Reviewed, error) {
	store := engine.Store
	var r runs.Result
	if err := runresults.Get(ctx, store, runID, &r); err != nil {
		return nil, err
	}
	spec, err := cat.Get(r.Task)
	if err != nil {
		return nil, err
	}
	obs, err := observe.Load(ctx, store, runID)
	if err != nil {
		return nil, err
	}
	in := review.Input{Result: &r, Spec: spec, Observations: obs, Experiments: runresults.Research(&r, obs, minExperiment).Experiments, Margin: margin,
		ReadFile: func(m *checkpoint.Manifest, p string, limit int64) ([]byte, error) {
			return engine.ReadFile(ctx, m, p, limit)
		}}
	if seq := r.FinalSeq(); seq > 0 {
		if in.Final, err = engine.Load(ctx, runID, seq); err != nil {
			return nil, fmt.Errorf("run %s's final checkpoint: %w", runID, err)
		}
		all, err := engine.List(ctx, runID)
		if err != nil {
			return nil, fmt.Errorf("run %s's checkpoints: %w", runID, err)
		}
		for _, m := range all {
			if m.Seq < seq {
				in.Earlier = append(in.Earlier, m)
			}
		}
	}
	if err := transcript.Each(ctx, store, runID, 0, func(c transcript.Call) error { in.Refusals.Add(c); in.Downloads.Add(c); return nil }); err != nil {
		return nil, fmt.Errorf("run %s's transcript: %w", runID, err)
	}
	v, err := review.Latest(ctx, store, runID)
	if err != nil {
		return nil, err
	}
	return &Reviewed{RunID: runID, Outcome: r.Outcome, Score: r.Score, Flags: review.Flags(in), Verdict: v}, nil
}

// SortReviews puts the most flagged runs first, keeping the runs'
// order among equals.
func SortReviews(all []Reviewed) {
	slices.SortStableFunc(all, func(a, b Reviewed) int { return len(b.Flags) - len(a.Flags) })
}

// WriteReviews prints reviews as `starter review` does: a line a run,
// its flags with their evidence under it, and what a flag is.
func WriteReviews(w io.Writer, all []Reviewed) {
	flagged := 0
	for _, r := range all {
		if len(r.Flags) > 0 {
			flagged++
		}
		verdict := "no verdict"
		if v := r.Verdict; v != nil {
			verdict = fmt.Sprintf("verdict %s by %s at %s: %s", v.Verdict, v.By, v.At.UTC().Format(time.RFC3339), v.Note)
		}
		score := string(r.Outcome) + ", no score"
		if r.Score != nil {
			score = fmt.Sprintf("%s, score %.6g", r.Outcome, *r.Score)
		}
		fmt.Fprintf(w, "%s  %s  %d flag(s)  (%s)\n", r.RunID, score, len(r.Flags), cli.Printable(verdict))
		for _, f := range r.Flags {
			// A flag quotes what the agent left (its commands, its file
			// names): never raw to a terminal.
			fmt.Fprintf(w, "  %s: %s\n    evidence: %s\n", f.Kind, cli.Printable(f.What), cli.Printable(strings.Join(f.Evidence, "; ")))
		}
	}
	fmt.Fprintf(w, "%d of %d run(s) flagged; flags are leads, not verdicts, and a run without one is not cleared: record a verdict with `starter review mark RUN_ID --verdict ok|hacked --note WHY`\n", flagged, len(all))
}
