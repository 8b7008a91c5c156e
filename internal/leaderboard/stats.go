package leaderboard

import (
	"math"
	"math/rand/v2"
	"sort"

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
		} else {
			row.Min, row.Max, row.SEM, row.CILow, row.CIHigh = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
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
// both scored).
type Pair struct {
	Task     string  `json:"task"`
	A        string  `json:"a"`
	B        string  `json:"b"`
	N        int     `json:"n"`
	MeanDiff float64 `json:"mean_diff"` // A - B
	SEM      float64 `json:"sem"`
}

// Paired computes the paired difference for every pair of agents per task.
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
	tasks := make([]string, 0, len(by))
	for t := range by {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	for _, t := range tasks {
		agents := make([]string, 0, len(by[t]))
		for a := range by[t] {
			agents = append(agents, a)
		}
		sort.Strings(agents)
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
				m, s := MeanStd(d)
				out = append(out, Pair{Task: t, A: agents[i], B: agents[j], N: len(d), MeanDiff: m, SEM: s / math.Sqrt(float64(len(d)))})
			}
		}
	}
	return out
}
