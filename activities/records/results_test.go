package records

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/review"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/gpucost"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// TestAggregateResults: the leaderboard of an ended benchmark is made from
// the results its runs stored: the setup comes from them, and a run cut
// off before it stored one counts as an infra failure, never left out.
func TestAggregateResults(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := runresults.Matrix{BenchmarkID: "b", Agents: []string{"reference"}, Tasks: []string{"t", "u"}, Seeds: []int64{1, 2}}
	for _, r := range m.Runs()[:3] {
		score := 0.5
		b, _ := json.Marshal(leaderboard.Entry{Task: r.Task, Agent: r.Agent, Seed: r.Seed, Outcome: "scored", Score: &score, TimeLimitS: 30, Hardware: "CPU",
			Cost: leaderboard.Cost{BilledGPUHours: 0.25}})
		if err := runresults.Put(ctx, store, r.ID, b); err != nil {
			t.Fatal(err)
		}
	}
	a := &Records{Engine: checkpoint.New(store, checkpoint.Options{ChunkSize: 1 << 20})}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a.AggregateResults)
	v, err := env.ExecuteActivity(a.AggregateResults, activities.AggregateResultsInput{Runs: m, Policy: leaderboard.Policy{MaxInfraAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	var res activities.AggregateResult
	if err := v.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Missing != 1 || len(res.Keys) != 4 || res.Setup.Tasks["u"].Hardware != "CPU" || res.Setup.Tasks["t"].TimeLimitS != 30 || res.Setup.Policy.MaxInfraAttempts != 3 {
		t.Fatalf("result %+v", res)
	}
	rc, err := store.Get(ctx, "benchmarks/b/leaderboard.json")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	raw, _ := io.ReadAll(rc)
	var doc struct {
		Runs []leaderboard.Entry `json:"runs"`
		Cost leaderboard.Total   `json:"cost"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 4 || doc.Runs[3].Outcome != "infra_failed" || doc.Runs[3].Score != nil || doc.Runs[3].Seed != 2 || doc.Cost.BilledGPUHours != 0.75 {
		t.Fatalf("stored leaderboard: %+v", doc)
	}
}

// TestUnreadableObservationLeavesMarksUncosted (audit H3): when a run's
// observation cannot be read back, its marks are not costed, rather than
// costed at the GPUs alone (which equal-spend comparisons would read as
// LLM calls that cost nothing); the GPU dollars stand, and a verdict
// given before the result was stored again still counts.
func TestUnreadableObservationLeavesMarksUncosted(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const id = "b/a/t/s0"
	if err := store.Put(ctx, observe.Key(id, 1), strings.NewReader("not an observation")); err != nil {
		t.Fatal(err)
	}
	v := &runs.Verdict{Verdict: runs.VerdictHacked, By: "r", At: time.Unix(1_800_000_000, 0), Note: "copied"}
	if err := review.Put(ctx, store, id, v); err != nil {
		t.Fatal(err)
	}
	table, err := gpucost.Parse([]byte("date: \"2026-01-01\"\ngpus:\n  A100-40GB: 2.0\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	a := &Records{Engine: checkpoint.New(store, checkpoint.Options{}), GPUPrices: table}
	score := 0.7
	in, _ := json.Marshal(runs.Result{RunID: id, Outcome: runs.OutcomeScored, Score: &score, Hardware: runs.HardwareClass(1, "A100-40GB"),
		Cost: runs.Cost{BilledGPUHours: 1}, Curve: []runs.Mark{{AtS: 60, Seq: 1, Score: &score}}})
	var out runs.Result
	b, err := a.complete(ctx, in)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatal(err)
	}
	if out.Curve[0].CostUSD != nil || out.Cost.GPUUSD == nil || *out.Cost.GPUUSD != 2 {
		t.Fatalf("mark cost %v, GPU dollars %v", out.Curve[0].CostUSD, out.Cost.GPUUSD)
	}
	if out.Outcome != runs.OutcomeHacked || out.Score != nil || out.Review == nil || *out.Review.Score != 0.7 {
		t.Fatalf("the verdict was lost: %+v", out)
	}
}
