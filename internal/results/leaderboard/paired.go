// Pair compares two agents on the seeds both ran to a verdict on one task, counted as the rows count them (a score, or the agent's failure at the.

package leaderboard

import (
	"maps"
	"math"
	"slices"
	"sort"
)

// Pair compares two agents on the seeds both ran to a verdict on one
// task, counted as the rows count them (a score, or the agent's failure
// at the task's floor; a run apart drops its seed from the pair): the
// paired difference A − B, its 95 % t interval and two-sided p-value,
// Holm-corrected across the tasks the two agents share.
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

// seedKey pairs runs: a seed, and which run of that seed it is when a
// campaign pools several benchmarks that ran it.
type seedKey struct {
	seed int64
	nth  int
}

// counted is each task's agents' counted values by seed: a score, or the
// floor for the agent's failure.
func countedBySeed(rs []Entry, anchors map[string]Anchor) map[string]map[string]map[seedKey]float64 {
	by := map[string]map[string]map[seedKey]float64{}
	seen := map[[2]string]map[int64]int{}
	for _, r := range rs {
		var v float64
		switch ClassOf(r.Outcome, r.Score) {
		case ClassScored:
			v = *r.Score
		case ClassAgentFailed:
			v, _ = FloorOf(r.Task, anchors)
		default:
			continue
		}
		if by[r.Task] == nil {
			by[r.Task] = map[string]map[seedKey]float64{}
		}
		if by[r.Task][r.Agent] == nil {
			by[r.Task][r.Agent] = map[seedKey]float64{}
		}
		k3 := [2]string{r.Task, r.Agent}
		if seen[k3] == nil {
			seen[k3] = map[int64]int{}
		}
		by[r.Task][r.Agent][seedKey{r.Seed, seen[k3][r.Seed]}] = v
		seen[k3][r.Seed]++
	}
	return by
}

// Paired computes the paired difference for every pair of agents per
// task, with Holm's correction over each pair's tasks.
func Paired(rs []Entry, anchors map[string]Anchor) []Pair {
	by := countedBySeed(rs, anchors)
	var out []Pair
	for _, t := range slices.Sorted(maps.Keys(by)) {
		agents := slices.Sorted(maps.Keys(by[t]))
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
				out = append(out, leaderFirst(pairOf(t, agents[i], agents[j], d)))
			}
		}
	}
	holm(out)
	return out
}

// pairOf is the paired t statistics of the differences d.
func pairOf(task, a, b string, d []float64) Pair {
	n := len(d)
	m, s := MeanStd(d)
	p := Pair{Task: task, A: a, B: b, N: n, MeanDiff: m, SD: s, SEM: s / math.Sqrt(float64(n)),
		CILow: math.NaN(), CIHigh: math.NaN(), P: math.NaN(), MDD: PairedMDD(s, n)}
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
	half := tQuantile(0.975, float64(n-1)) * p.SEM
	p.CILow, p.CIHigh = m-half, m+half
	p.P = 2 * studentsT(float64(n-1)).Survival(math.Abs(m/p.SEM))
	return p
}

// leaderFirst orients a pair so that its difference reads as a lead
// (A − B ≥ 0).
func leaderFirst(p Pair) Pair {
	if !(p.MeanDiff < 0) {
		return p
	}
	p.A, p.B, p.MeanDiff, p.CILow, p.CIHigh = p.B, p.A, -p.MeanDiff, -p.CIHigh, -p.CILow
	return p
}

// holm sets PHolm: Holm's step-down correction of the p-values of each
// agent pair over the tasks it was compared on (the family a claim "A
// beats B" rests on).
func holm(ps []Pair) {
	fam := map[[2]string][]int{}
	for i, p := range ps {
		k := [2]string{min(p.A, p.B), max(p.A, p.B)}
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
