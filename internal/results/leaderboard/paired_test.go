package leaderboard

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestPairedTTest: the paired difference's t interval and p-value match
// figures computed apart (differences 0.10, 0.20, 0.15, 0.05, 0.12: sd
// 0.05595, t = 4.956 on 4 degrees of freedom, p = 0.00773 by integrating
// the t density, t₀.₉₇₅ = 2.776).
func TestPairedTTest(t *testing.T) {
	d := []float64{0.10, 0.20, 0.15, 0.05, 0.12}
	var rs []Entry
	for i, x := range d {
		a, b := 0.5+x, 0.5
		rs = append(rs, Entry{Task: "t", Agent: "a", Seed: int64(i), Score: &a}, Entry{Task: "t", Agent: "b", Seed: int64(i), Score: &b})
	}
	ps := Paired(rs, nil)
	if len(ps) != 1 {
		t.Fatalf("pairs %+v", ps)
	}
	p := ps[0]
	sem := 0.0559464 / math.Sqrt(5)
	if !near(p.MeanDiff, 0.124, 1e-9) || !near(p.SD, 0.0559464, 1e-6) || !near(p.P, 0.0077279, 1e-6) || p.PHolm != p.P {
		t.Fatalf("pair %+v", p)
	}
	if !near(p.CILow, 0.124-2.776445*sem, 1e-5) || !near(p.CIHigh, 0.124+2.776445*sem, 1e-5) || !p.Significant() {
		t.Fatalf("interval [%v, %v]", p.CILow, p.CIHigh)
	}
}

// TestHolmAcrossTasks: Holm's step-down over one agent pair's tasks
// (p = 0.01, 0.04, 0.03 → 0.03, 0.06, 0.06), another pair apart.
func TestHolmAcrossTasks(t *testing.T) {
	ps := []Pair{{Task: "x", A: "a", B: "b", P: 0.01}, {Task: "y", A: "a", B: "b", P: 0.04}, {Task: "z", A: "a", B: "b", P: 0.03}, {Task: "x", A: "a", B: "c", P: 0.04}}
	holm(ps)
	for i, want := range []float64{0.03, 0.06, 0.06, 0.04} {
		if !near(ps[i].PHolm, want, 1e-12) {
			t.Fatalf("pair %d: Holm p %v, want %v", i, ps[i].PHolm, want)
		}
	}
}

// TestPlanTakesThePairedSigma: where two agents share seeds the plan
// uses the σ of their differences, else one agent's σ, else says it
// cannot tell.
func TestPlanTakesThePairedSigma(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	rs := []Entry{
		// x: a and b share seeds 0..2; differences 0.10, 0.12, 0.14 (σ 0.02).
		{Task: "x", Agent: "a", Seed: 0, Score: f(0.60)}, {Task: "x", Agent: "b", Seed: 0, Score: f(0.50)},
		{Task: "x", Agent: "a", Seed: 1, Score: f(0.72)}, {Task: "x", Agent: "b", Seed: 1, Score: f(0.60)},
		{Task: "x", Agent: "a", Seed: 2, Score: f(0.54)}, {Task: "x", Agent: "b", Seed: 2, Score: f(0.40)},
		// y: one agent, σ 0.1.
		{Task: "y", Agent: "a", Seed: 0, Score: f(0.4)}, {Task: "y", Agent: "a", Seed: 1, Score: f(0.6)}, {Task: "y", Agent: "a", Seed: 2, Score: f(0.5)},
		{Task: "z", Agent: "a", Seed: 0, Score: f(0.4)},
	}
	plan := Plan(rs, nil, 0.05)
	if len(plan) != 3 {
		t.Fatalf("plan %+v", plan)
	}
	x, y, z := plan[0], plan[1], plan[2]
	if !x.Paired || !near(x.Sigma, 0.02, 1e-9) || x.Need != PairedSeeds(0.02, 0.05) || x.Seeds != 3 {
		t.Fatalf("x: %+v", x)
	}
	if y.Paired || !near(y.Sigma, 0.1, 1e-9) || y.Need != UnpairedSeeds(0.1, 0.05) || y.Need != 64 {
		t.Fatalf("y: %+v", y)
	}
	if z.Need != 0 || z.Source == "" {
		t.Fatalf("z: %+v", z)
	}
}
