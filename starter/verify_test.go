package main

import (
	"strings"
	"testing"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/bundle"
)

// TestARunWithNoScoreNeverAgrees (audit M3): a bundle whose run has no
// score is never "agree", whatever is scored here; a scored run agrees
// only with its own evaluator's score within the tolerance.
func TestARunWithNoScoreNeverAgrees(t *testing.T) {
	var out strings.Builder
	g := &globals{out: &out}
	c := &bundle.Checked{RunID: "r", Predicate: bundle.Predicate{Evaluator: "sha256:e"}}
	here := &activities.EvalResult{Score: 0.5, Image: "sha256:e"}
	for _, outcome := range []runs.Outcome{runs.OutcomeAgentFailed, runs.OutcomeEvaluationFailed, runs.OutcomeInfraFailed} {
		out.Reset()
		if v := reportRescore(g, c, &runs.Result{Outcome: outcome}, here, 0.01, ""); v != notCompared || !strings.Contains(out.String(), "NOT COMPARED") {
			t.Fatalf("a bundle's %s run: verdict %v\n%s", outcome, v, out.String())
		}
	}
	s := 0.5
	if v := reportRescore(g, c, &runs.Result{Outcome: runs.OutcomeScored, Score: &s}, here, 0, ""); v != agreed {
		t.Fatalf("the same score: %v", v)
	}
	far := 0.6
	if v := reportRescore(g, c, &runs.Result{Outcome: runs.OutcomeScored, Score: &far}, here, 0.01, ""); v != disagreed {
		t.Fatalf("a score 0.1 away: %v", v)
	}
}
