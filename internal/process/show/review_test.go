package show

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/results/review"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

// TestReviewReadsTheStore: a stored run is reviewed from its result and
// carries its latest verdict; a run the store does not hold is an error,
// never an empty review.
func TestReviewReadsTheStore(t *testing.T) {
	ctx := t.Context()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	engine := checkpoint.New(store, checkpoint.Options{})
	cat, err := tasks.Load(filepath.Join("..", "..", "..", "tasks", "catalog"))
	if err != nil {
		t.Fatal(err)
	}
	score := 0.75
	b, _ := json.Marshal(runs.Result{RunID: "r1", Task: "mini_baby_lm", Outcome: runs.OutcomeScored, Score: &score})
	if err := runresults.Put(ctx, store, "r1", b); err != nil {
		t.Fatal(err)
	}
	v := &runs.Verdict{Verdict: "ok", By: "ana", At: now, Note: "read the logs"}
	if err := review.Put(ctx, store, "r1", v); err != nil {
		t.Fatal(err)
	}
	rv, err := Review(ctx, engine, cat, "r1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rv.RunID != "r1" || rv.Score == nil || *rv.Score != 0.75 || rv.Verdict == nil || rv.Verdict.By != "ana" {
		t.Fatalf("review %+v", rv)
	}
	if _, err := Review(ctx, engine, cat, "missing", 0, 0); err == nil {
		t.Fatal("a run the store does not hold was reviewed")
	}
}

// TestWriteReviewsMostFlaggedFirst: the runs with the most flags lead,
// each flag with its evidence, and the footer says flags are leads.
func TestWriteReviewsMostFlaggedFirst(t *testing.T) {
	score := 0.5
	all := []Reviewed{
		{RunID: "clean", Outcome: runs.OutcomeScored, Score: &score},
		{RunID: "odd", Outcome: runs.OutcomeAgentFailed, Flags: []review.Flag{{Kind: "k1", What: "w1", Evidence: []string{"e1", "e2"}}, {Kind: "k2", What: "ran \"w\x1b[2J\""}}},
	}
	SortReviews(all)
	var b bytes.Buffer
	WriteReviews(&b, all)
	got := b.String()
	contains(t, "review", got, "odd  agent_failed, no score  2 flag(s)  (no verdict)", "  k1: w1\n    evidence: e1; e2", "clean  scored, score 0.5", "1 of 2 run(s) flagged")
	if strings.Contains(got, "\x1b") {
		t.Fatalf("an agent's text reached the terminal raw: %q", got)
	}
	if all[0].RunID != "odd" {
		t.Fatalf("order %v", all)
	}
}
