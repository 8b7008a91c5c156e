package show

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// TestRecostedUnderAnotherTable: `starter results --prices` costs each
// run's measured LLM use again from its per-model ledger and names the
// table; a model the table lacks is a usage error naming run and model.
func TestRecostedUnderAnotherTable(t *testing.T) {
	var l llm.Ledger
	l.Record("gpt-4o", llm.Usage{Calls: 2, USD: 5, Tokens: llm.Tokens{Input: 2e6}})
	rs := []runs.Result{{RunID: "r1", Cost: runs.Cost{LLM: &l}}, {RunID: "r2"}}
	cheap, err := llm.ParsePrices([]byte("date: 2027-01-01\nmodels:\n- names: [gpt-4o]\n  input: 0.5\n  output: 1\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Recosted(rs, cheap)
	if err != nil || got[0].Cost.LLM.USD != 1 || got[0].Cost.LLMPrices.Date != "2027-01-01" || got[1].Cost.LLM != nil {
		t.Fatalf("recosted %+v %v", got, err)
	}
	if rs[0].Cost.LLM.USD != 5 {
		t.Error("recosting changed the runs it was given")
	}
	empty, _ := llm.ParsePrices([]byte("date: 2027-01-01\nmodels: []\n"), "t")
	if _, err := Recosted(rs, empty); err == nil || !strings.Contains(err.Error(), "run r1") || !strings.Contains(err.Error(), "gpt-4o") {
		t.Errorf("an unpriced model: %v", err)
	}
}

// TestLeaderboardSaysWhatToDoNext: under the table, the runs without a
// score (and why), the retry of an evaluation that failed, the report.
func TestLeaderboardSaysWhatToDoNext(t *testing.T) {
	score := 0.5
	rs := []runs.Result{{RunID: "b/a/t/s1", Task: "t", Agent: "a", Seed: 1, Outcome: runs.OutcomeScored, Score: &score},
		{RunID: "b/a/t/s2", Task: "t", Agent: "a", Seed: 2, Outcome: runs.OutcomeEvaluationFailed, Reason: "evaluator crashed"}}
	var b bytes.Buffer
	if err := WriteLeaderboard(&b, "b + c", rs, leaderboard.Setup{}, "table"); err != nil {
		t.Fatal(err)
	}
	contains(t, "leaderboard", b.String(), "1 runs without a score", "b/a/t/s2 (evaluation_failed: evaluator crashed)",
		"starter retry-eval b/a/t/s2", "starter report b c -o DIR")
	b.Reset()
	if err := WriteLeaderboard(&b, "b", rs, leaderboard.Setup{}, "csv"); err != nil || strings.Contains(b.String(), "retry-eval") {
		t.Fatalf("csv: %v\n%s", err, b.String())
	}
	if err := WriteLeaderboard(&b, "b", rs, leaderboard.Setup{}, "yaml"); err == nil {
		t.Fatal("an unknown format was written")
	}
}
