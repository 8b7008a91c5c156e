package leaderboard

import (
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/mlrb/mlrb/internal/runs"
)

// Row summarises one task × agent.
type Row struct {
	Task    string `json:"task"`
	Agent   string `json:"agent"`
	Runs    int    `json:"runs"`
	Scored  int    `json:"scored"`  // runs with a score (scored or limit_reached)
	Invalid int    `json:"invalid"` // runs without a score: never averaged as 0
	// Disqualified are the invalid runs whose model broke the task's rules.
	Disqualified int     `json:"disqualified"`
	Retried      int     `json:"retried"` // runs that took more than one agent attempt or evaluation
	Mean         float64 `json:"mean"`
	Std          float64 `json:"std"` // sample standard deviation of the scores
	SEM          float64 `json:"sem"` // standard error of the mean: std / sqrt(n)
	Min          float64 `json:"min"`
	Max          float64 `json:"max"`
	// CILow and CIHigh bound a 95 % bootstrap interval of the mean.
	CILow  float64 `json:"ci95_low"`
	CIHigh float64 `json:"ci95_high"`
	// MDD is the smallest difference from another agent these seeds
	// detect (80 % power, α = 0.05, unpaired): MDD(Std, Scored).
	MDD float64 `json:"-"`
	// Cost is what the group's runs consumed.
	Cost Total `json:"cost"`
	// GapClosed is the mean's share of its task's anchor gap, in percent
	// (NaN without anchors or a score); NearZeroGap flags a gap too small
	// to divide by. Baseline and Top are the anchors.
	GapClosed   float64  `json:"-"`
	NearZeroGap bool     `json:"-"`
	Baseline    *float64 `json:"-"`
	Top         *float64 `json:"-"`
}

// Summarise groups runs by task and agent.
func Summarise(results []Run) []Row {
	type key struct{ task, agent string }
	groups := map[key][]Run{}
	for _, r := range results {
		k := key{r.Task, r.Agent}
		groups[k] = append(groups[k], r)
	}
	var rows []Row
	for k, rs := range groups {
		row := Row{Task: k.task, Agent: k.agent, Runs: len(rs), Min: math.Inf(1), Max: math.Inf(-1), GapClosed: math.NaN()}
		var xs []float64
		for _, r := range rs {
			row.Cost.Add(r.Cost)
			if r.Attempts > 1 || r.EvalTries > 1 {
				row.Retried++
			}
			if r.Outcome == runs.OutcomeDisqualified {
				row.Disqualified++
			}
			if r.Score == nil {
				row.Invalid++
				continue
			}
			xs = append(xs, *r.Score)
			row.Min = math.Min(row.Min, *r.Score)
			row.Max = math.Max(row.Max, *r.Score)
		}
		row.Scored = len(xs)
		row.Mean, row.Std = MeanStd(xs)
		if row.Scored > 0 {
			row.SEM = row.Std / math.Sqrt(float64(row.Scored))
			row.CILow, row.CIHigh = BootstrapCI(xs, 2000, 0.95, 42)
			row.MDD = MDD(row.Std, row.Scored)
		} else {
			row.Min, row.Max, row.SEM, row.CILow, row.CIHigh, row.MDD = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Task != rows[j].Task {
			return rows[i].Task < rows[j].Task
		}
		return rows[i].Agent < rows[j].Agent
	})
	return rows
}

// MeanStd returns the mean and the sample standard deviation (n-1).
func MeanStd(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// BootstrapCI is the percentile bootstrap interval of the mean: resample
// with replacement, seeded so that a leaderboard is reproducible.
func BootstrapCI(xs []float64, resamples int, level float64, seed uint64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	r := rand.New(rand.NewPCG(seed, uint64(len(xs))))
	means := make([]float64, resamples)
	for i := range means {
		sum := 0.0
		for range xs {
			sum += xs[r.IntN(len(xs))]
		}
		means[i] = sum / float64(len(xs))
	}
	sort.Float64s(means)
	lo := int(math.Floor((1 - level) / 2 * float64(resamples)))
	hi := int(math.Ceil((1+level)/2*float64(resamples))) - 1
	return means[lo], means[min(hi, resamples-1)]
}

// Pair compares two agents on the runs they share (same task and seed,
// both scored): the paired difference A − B, its 95 % t interval and
// two-sided p-value, Holm-corrected across the tasks the two agents share.
type Pair struct {
	Task     string  `json:"task"`
	A        string  `json:"a"`
	B        string  `json:"b"`
	N        int     `json:"n"`
	MeanDiff float64 `json:"mean_diff"` // A - B
	SD       float64 `json:"sd"`        // of the differences
	SEM      float64 `json:"sem"`
	CILow    float64 `json:"ci95_low"`
	CIHigh   float64 `json:"ci95_high"`
	P        float64 `json:"p"`
	PHolm    float64 `json:"p_holm"`
	// MDD is the smallest difference these seeds detect with 80 % power at
	// α = 0.05 (NaN under two seeds).
	MDD float64 `json:"mdd"`
}

// Significant tells whether the difference holds at α = 0.05 after Holm.
func (p Pair) Significant() bool { return p.PHolm < 0.05 }

// Paired computes the paired difference for every pair of agents per
// task, with Holm's correction over each pair's tasks.
func Paired(runs []Run) []Pair {
	by := map[string]map[string]map[int64]float64{} // task -> agent -> seed -> score
	for _, r := range runs {
		if r.Score == nil {
			continue
		}
		if by[r.Task] == nil {
			by[r.Task] = map[string]map[int64]float64{}
		}
		if by[r.Task][r.Agent] == nil {
			by[r.Task][r.Agent] = map[int64]float64{}
		}
		by[r.Task][r.Agent][r.Seed] = *r.Score
	}
	var out []Pair
	for _, t := range sortedKeys(by) {
		agents := sortedKeys(by[t])
		for i := range agents {
			for j := i + 1; j < len(agents); j++ {
				var d []float64
				for seed, x := range by[t][agents[i]] {
					if y, ok := by[t][agents[j]][seed]; ok {
						d = append(d, x-y)
					}
				}
				if len(d) == 0 {
					continue
				}
				sort.Float64s(d)
				out = append(out, pairOf(t, agents[i], agents[j], d))
			}
		}
	}
	holm(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// pairOf is the paired t statistics of the differences d.
func pairOf(task, a, b string, d []float64) Pair {
	n := len(d)
	m, s := MeanStd(d)
	p := Pair{Task: task, A: a, B: b, N: n, MeanDiff: m, SD: s, SEM: s / math.Sqrt(float64(n)),
		CILow: math.NaN(), CIHigh: math.NaN(), P: math.NaN(), MDD: MDD(s, n)}
	if n < 2 {
		return p
	}
	if s == 0 { // every seed differs alike: no spread to test against
		p.CILow, p.CIHigh, p.P = m, m, 1
		if m != 0 {
			p.P = 0
		}
		return p
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}
	half := t.Quantile(0.975) * p.SEM
	p.CILow, p.CIHigh = m-half, m+half
	p.P = 2 * t.Survival(math.Abs(m/p.SEM))
	return p
}

// holm sets PHolm: Holm's step-down correction of the p-values of each
// agent pair over the tasks it was compared on (the family a claim "A
// beats B" rests on).
func holm(ps []Pair) {
	fam := map[[2]string][]int{}
	for i, p := range ps {
		k := [2]string{p.A, p.B}
		fam[k] = append(fam[k], i)
	}
	for _, idx := range fam {
		var tested []int
		for _, i := range idx {
			if math.IsNaN(ps[i].P) {
				ps[i].PHolm = math.NaN()
			} else {
				tested = append(tested, i)
			}
		}
		sort.SliceStable(tested, func(a, b int) bool { return ps[tested[a]].P < ps[tested[b]].P })
		m, run := len(tested), 0.0
		for k, i := range tested {
			run = math.Max(run, math.Min(1, float64(m-k)*ps[i].P))
			ps[i].PHolm = run
		}
	}
}

// PowerFactor is 2·(z₀.₉₇₅ + z₀.₈)², about 15.7: with it, n ≈
// PowerFactor·σ²/δ² + 1 seeds detect a difference δ with 80 % power at
// α = 0.05 (two-sided).
var PowerFactor = 2 * math.Pow(distuv.UnitNormal.Quantile(0.975)+distuv.UnitNormal.Quantile(0.8), 2)

// SeedsFor is the seeds needed to detect delta given the spread sigma.
func SeedsFor(sigma, delta float64) int {
	return int(math.Ceil(PowerFactor*sigma*sigma/(delta*delta))) + 1
}

// MDD is the minimum detectable difference at n seeds and spread sigma:
// SeedsFor backwards (NaN under two seeds).
func MDD(sigma float64, n int) float64 {
	if n < 2 {
		return math.NaN()
	}
	return math.Sqrt(PowerFactor * sigma * sigma / float64(n-1))
}
