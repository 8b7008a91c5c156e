package activities

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/mlrb/mlrb/internal/blob"
	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/leaderboard"
	"github.com/mlrb/mlrb/internal/runresults"
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
	v, err := env.ExecuteActivity(a.AggregateResults, AggregateResultsInput{Runs: m, Policy: leaderboard.Policy{MaxInfraAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	var res AggregateResult
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
