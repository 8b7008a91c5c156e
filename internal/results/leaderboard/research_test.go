package leaderboard

import (
	"bytes"
	"encoding/csv"
	"math"
	"testing"

	"github.com/mlrb/mlrb/internal/run/runs"
)

// TestResearchAndGPUDollars: a task × agent's row averages its observed
// runs' research measures (a run never observed is left out of them) and
// sums GPU dollars beside LLM dollars, counting unpriced runs apart; the
// CSV carries both.
func TestResearchAndGPUDollars(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	score := f(0.5)
	es := []Entry{
		{Task: "t", Agent: "a", Seed: 1, Outcome: runs.OutcomeScored, Score: score, Cost: Cost{GPUUSD: f(10)},
			Research: &runs.Measures{PerHour: 2, GPUBusyShare: f(0.5), FirstModelS: f(3600), LongestStallS: 600, GPUHoursNoModel: 1, CutOffHours: 0.5}},
		{Task: "t", Agent: "a", Seed: 2, Outcome: runs.OutcomeScored, Score: score, Cost: Cost{GPUUSD: f(20)},
			Research: &runs.Measures{PerHour: 4, LongestStallS: 1200, GPUHoursNoModel: 3}},
		{Task: "t", Agent: "a", Seed: 3, Outcome: runs.OutcomeScored, Score: score},
	}
	rows := Summarise(es, nil)
	r := rows[0].Research
	if r == nil || r.Runs != 2 || r.ExperimentsPerHour != 3 || *r.GPUBusyShare != 0.5 || *r.FirstModelS != 3600 || r.NoModelRuns != 1 ||
		r.LongestStallS != 900 || r.GPUHoursNoModel != 2 || r.CutOffHours != 0.25 {
		t.Fatalf("research %+v", r)
	}
	if c := rows[0].Cost; c.GPUUSD != 30 || c.GPUUnpriced != 1 {
		t.Fatalf("cost %+v", c)
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]string{}
	for i, h := range recs[0] {
		col[h] = recs[1][i]
	}
	if col["gpu_usd"] != "30.0000" || col["experiments_per_hour"] != "3.0000" || col["observed_runs"] != "2" {
		t.Fatalf("csv row %v", col)
	}
	if none := researchOf(es[2:]); none != nil || !math.IsNaN(mean(nil)) {
		t.Fatalf("an unobserved run's research %+v", none)
	}
}
