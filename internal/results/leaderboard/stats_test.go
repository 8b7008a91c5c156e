package leaderboard

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mlrb/mlrb/internal/run/runs"
)

// TestTIntervalAtThreeSeeds: at the demo's three seeds the interval is
// Student's (t₀.₉₇₅ on 2 df = 4.3027), not the min and max of the seeds a
// percentile bootstrap gives there, which covers the mean about 75 % of
// the time.
func TestTIntervalAtThreeSeeds(t *testing.T) {
	xs := []float64{0.8789, 0.9000, 0.9200}
	rows := Summarise([]Entry{
		{Task: "t", Agent: "a", Seed: 1, Outcome: runs.OutcomeScored, Score: &xs[0]},
		{Task: "t", Agent: "a", Seed: 2, Outcome: runs.OutcomeScored, Score: &xs[1]},
		{Task: "t", Agent: "a", Seed: 3, Outcome: runs.OutcomeScored, Score: &xs[2]},
	}, nil)
	r := rows[0]
	m, s := MeanStd(xs)
	half := 4.302653 * s / math.Sqrt(3)
	if r.CIMethod != "t" || !near(r.CILow, m-half, 1e-6) || !near(r.CIHigh, m+half, 1e-6) {
		t.Fatalf("interval [%v, %v] by %s, want [%v, %v] by t", r.CILow, r.CIHigh, r.CIMethod, m-half, m+half)
	}
	if lo, hi := BootstrapCI(xs, 2000, 0.95, 42); r.CILow >= lo || r.CIHigh <= hi {
		t.Fatalf("the t interval [%v, %v] must be wider than the bootstrap's [%v, %v] at n = 3", r.CILow, r.CIHigh, lo, hi)
	}
	// Coverage, simulated: 3 normal draws, 20,000 times.
	rng := rand.New(rand.NewPCG(1, 2))
	tCover, bootCover := 0, 0
	const trials = 4000
	for range trials {
		d := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		if lo, hi := TInterval(d); lo <= 0 && 0 <= hi {
			tCover++
		}
		if lo, hi := BootstrapCI(d, 200, 0.95, 1); lo <= 0 && 0 <= hi {
			bootCover++
		}
	}
	if c := float64(tCover) / trials; c < 0.93 || c > 0.97 {
		t.Fatalf("t interval covers %.3f of the time", c)
	}
	if c := float64(bootCover) / trials; c > 0.80 {
		t.Fatalf("bootstrap at n = 3 covers %.3f: the test's premise is wrong", c)
	}
	// Many runs: the bootstrap, named so.
	many := make([]float64, BootstrapFrom)
	for i := range many {
		many[i] = float64(i) / 100
	}
	if _, _, method := MeanInterval(many); method != "bootstrap" {
		t.Fatalf("at %d runs the method is %s", BootstrapFrom, method)
	}
}

// TestWilson: 1 of 5 is [0.0362, 0.6245] (computed apart); 0 of n and n
// of n stay inside [0, 1].
func TestWilson(t *testing.T) {
	if lo, hi := Wilson(1, 5); !near(lo, 0.0362, 1e-4) || !near(hi, 0.6245, 1e-4) {
		t.Fatalf("1 of 5: [%v, %v]", lo, hi)
	}
	if lo, hi := Wilson(0, 3); lo != 0 || hi <= 0 || hi >= 1 {
		t.Fatalf("0 of 3: [%v, %v]", lo, hi)
	}
	if lo, hi := Wilson(3, 3); hi != 1 || lo <= 0 {
		t.Fatalf("3 of 3: [%v, %v]", lo, hi)
	}
}

// TestFailuresCount: an agent that crashes on 4 of 5 seeds and scores
// 0.9 on the fifth is not ranked by its lucky seed: its success rate is
// 20 %, its mean with failures (at the baseline anchor 0.25) 0.38, below
// an agent that scores 0.6 every time, and the paired comparison counts
// the failed seeds. Infra failures stay apart.
func TestFailuresCount(t *testing.T) {
	var rs []Entry
	lucky, steady := 0.9, 0.6
	for seed := int64(1); seed <= 5; seed++ {
		a := Entry{Task: "t", Agent: "crashy", Seed: seed, Outcome: runs.OutcomeAgentFailed}
		if seed == 3 {
			a.Outcome, a.Score = runs.OutcomeScored, &lucky
		}
		rs = append(rs, a, Entry{Task: "t", Agent: "steady", Seed: seed, Outcome: runs.OutcomeScored, Score: &steady})
	}
	rs = append(rs, Entry{Task: "t", Agent: "crashy", Seed: 6, Outcome: runs.OutcomeInfraFailed})
	anchors := map[string]Anchor{"t": {Baseline: 0.25, Top: 0.85}}
	b := Build(rs, Setup{Anchors: anchors})
	crashy, steadyRow := b.Rows[0], b.Rows[1]
	if crashy.Scored != 1 || crashy.AgentFailed != 4 || crashy.Invalid != 1 || crashy.Counted != 5 || !near(crashy.SuccessRate, 0.2, 1e-12) {
		t.Fatalf("crashy %+v", crashy)
	}
	if crashy.Mean != 0.9 || !near(crashy.FloorMean, (0.9+4*0.25)/5, 1e-12) || crashy.FloorMean >= steadyRow.FloorMean {
		t.Fatalf("crashy's mean with failures %v, steady's %v", crashy.FloorMean, steadyRow.FloorMean)
	}
	if b.Agents[0].Agent != "steady" || b.Agents[1].Agent != "crashy" {
		t.Fatalf("ranking %+v", b.Agents)
	}
	if g := b.Agents[1].Gap; !near(g, 100*(0.38-0.25)/0.6, 1e-9) {
		t.Fatalf("crashy's gap closed %v", g)
	}
	if len(b.Pairs) != 1 || b.Pairs[0].A != "steady" || b.Pairs[0].N != 5 || !near(b.Pairs[0].MeanDiff, 0.6-0.38, 1e-12) {
		t.Fatalf("pairs %+v", b.Pairs)
	}
}

// TestPlanPower simulates paired t-tests at the seeds the plan asks for:
// their power is 0.80 ± 0.03, and one seed fewer does not reach 0.80.
func TestPlanPower(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, c := range []struct{ sigma, delta float64 }{{0.05, 0.05}, {0.08, 0.05}, {0.1, 0.05}, {0.03, 0.02}} {
		n := PairedSeeds(c.sigma, c.delta)
		p := simulatedPower(rng, n, c.sigma, c.delta)
		if p < 0.77 || p > 0.83 {
			t.Errorf("σ %v, δ %v: %d seeds have power %.3f", c.sigma, c.delta, n, p)
		}
		if q := simulatedPower(rng, n-1, c.sigma, c.delta); q >= 0.80 {
			t.Errorf("σ %v, δ %v: %d seeds already have power %.3f", c.sigma, c.delta, n-1, q)
		}
		t.Logf("σ %v, δ %v: %d seeds, power %.3f", c.sigma, c.delta, n, p)
	}
}

func simulatedPower(rng *rand.Rand, n int, sigma, delta float64) float64 {
	const draws = 20000
	crit := tQuantile(0.975, float64(n-1))
	hit := 0
	d := make([]float64, n)
	for range draws {
		for i := range d {
			d[i] = delta + sigma*rng.NormFloat64()
		}
		m, s := MeanStd(d)
		if math.Abs(m/(s/math.Sqrt(float64(n)))) > crit {
			hit++
		}
	}
	return float64(hit) / draws
}
