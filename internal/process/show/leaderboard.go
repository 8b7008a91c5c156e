// A benchmark's leaderboard as `starter results` prints it, and its runs costed again under another price table.

package show

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// WriteLeaderboard prints the leaderboard of benchmark id (ids joined by
// " + " for a campaign) in format; a table is followed by the runs without
// a score and what to do next.
func WriteLeaderboard(w io.Writer, id string, rs []runs.Result, setup leaderboard.Setup, format string) error {
	if err := leaderboard.Write(w, format, id, leaderboard.Build(leaderboard.RunsOf(rs), setup)); err != nil {
		return err
	}
	if format != "table" {
		return nil
	}
	var unscored, retry []string
	for _, r := range rs {
		if r.Score == nil {
			unscored = append(unscored, fmt.Sprintf("%s (%s: %s)", r.RunID, r.Outcome, r.Reason))
			if r.Outcome == runs.OutcomeEvaluationFailed {
				retry = append(retry, r.RunID)
			}
		}
	}
	if len(unscored) > 0 {
		fmt.Fprintf(w, "\n%d runs without a score (the agent's failures count at the task's floor in the mean with failures; the others apart, never averaged):\n  %s\n",
			len(unscored), strings.Join(unscored, "\n  "))
	}
	fmt.Fprintln(w)
	for _, id := range retry {
		fmt.Fprintf(w, "evaluate again, the agent's work kept: starter retry-eval %s\n", id)
	}
	ids := strings.ReplaceAll(id, " + ", " ")
	fmt.Fprintf(w, "curves, each run's timeline and provenance: starter report %s -o DIR\n", ids)
	if setup.Terse && len(setup.Anchors) > 0 {
		fmt.Fprintf(w, "where each anchor comes from: starter results %s --provenance\n", ids)
	}
	return nil
}

// Recosted is the runs with their measured LLM use costed under prices:
// any past run can be costed again, from its per-model ledger.
func Recosted(rs []runs.Result, prices *llm.Prices) ([]runs.Result, error) {
	out := slices.Clone(rs)
	for i, r := range out {
		if r.Cost.LLM == nil {
			continue
		}
		usd, err := r.Cost.LLM.Recost(prices)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", r.RunID, err)
		}
		l, ref := r.Cost.LLM.Clone(), prices.Ref()
		l.USD = usd
		out[i].Cost.LLM, out[i].Cost.LLMPrices = &l, &ref
	}
	return out, nil
}
