// Anchors and each agent's gap closed.

package leaderboard

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
)

// Anchor is a task's baseline and top scores and where they come from.
type Anchor struct {
	Baseline float64 `json:"baseline"`
	Top      float64 `json:"top"`
	// Source says how each was obtained: the runs and evaluator that
	// measured it, or a citation.
	Source string `json:"source,omitempty"`
	// Evaluators are the evaluator digests that measured them (none when
	// cited): a run scored by another evaluator is warned of.
	Evaluators []string `json:"evaluators,omitempty"`
}

// nearZeroGap: a gap this small relative to the anchors (or absolutely,
// near 0) makes the share of it closed a division by noise.
const nearZeroGap = 0.01

// GapClosed is MLRC-Bench's relative improvement: 100 × (score −
// baseline) / (top − baseline), unclipped (negative below the baseline,
// over 100 above the top). near says the gap is too small to divide by
// (within 1 % of the anchors' size); the share is then NaN when the gap
// is zero.
func (a Anchor) GapClosed(score float64) (pct float64, near bool) {
	gap := a.Top - a.Baseline
	near = math.Abs(gap) <= nearZeroGap*math.Max(math.Max(math.Abs(a.Top), math.Abs(a.Baseline)), 1e-9)
	if gap == 0 || math.IsNaN(score) {
		return math.NaN(), near
	}
	return 100 * (score - a.Baseline) / gap, near
}

// AgentSummary is one agent over the whole board: its runs' success rate
// (Wilson interval), its gap closed averaged over the tasks with anchors
// (floor-counted, with a t interval whose degrees of freedom are
// Welch–Satterthwaite's over the tasks' seeds: tasks are fixed), and
// what its runs cost.
type AgentSummary struct {
	Agent string `json:"agent"`
	// Certified is its certification's line ("": none known).
	Certified   string  `json:"certified,omitempty"`
	Runs        int     `json:"runs"`
	Scored      int     `json:"scored"`
	AgentFailed int     `json:"agent_failed"`
	Invalid     int     `json:"invalid"`
	SuccessRate float64 `json:"success_rate"`
	SuccessLow  float64 `json:"success_low"`
	SuccessHigh float64 `json:"success_high"`
	// Gap is the mean gap closed over GapTasks tasks, in percent; GapLow
	// and GapHigh its 95 % interval (NaN when a task has under two runs).
	Gap      float64 `json:"-"`
	GapLow   float64 `json:"-"`
	GapHigh  float64 `json:"-"`
	GapTasks int     `json:"gap_tasks"`
	// MeanScore is the mean over its tasks of each task's mean with
	// failures at the floor: the ranking where no task has anchors.
	MeanScore float64 `json:"mean_score_with_failures"`
	Cost      Total   `json:"cost"`
}

// Agents summarises each agent over rows, best first: by gap closed
// where there are anchors, else by mean score with failures counted.
func Agents(rows []Row) []AgentSummary {
	by := map[string]*AgentSummary{}
	type gapPart struct{ g, se2, df float64 }
	parts := map[string][]gapPart{}
	scores := map[string][]float64{}
	for _, r := range rows {
		a := by[r.Agent]
		if a == nil {
			a = &AgentSummary{Agent: r.Agent}
			by[r.Agent] = a
		}
		a.Runs += r.Runs
		a.Scored += r.Scored
		a.AgentFailed += r.AgentFailed
		a.Invalid += r.Invalid
		a.Cost.add(r.Cost)
		if r.Counted > 0 {
			scores[r.Agent] = append(scores[r.Agent], r.FloorMean)
		}
		if r.Baseline == nil || math.IsNaN(r.GapClosed) || math.IsInf(r.GapClosed, 0) {
			continue
		}
		se := 100 * r.floorSEM() / math.Abs(*r.Top-*r.Baseline)
		parts[r.Agent] = append(parts[r.Agent], gapPart{r.GapClosed, se * se, float64(r.Counted - 1)})
	}
	out := make([]AgentSummary, 0, len(by))
	for _, name := range slices.Sorted(maps.Keys(by)) {
		a := *by[name]
		a.SuccessRate, a.SuccessLow, a.SuccessHigh = math.NaN(), math.NaN(), math.NaN()
		if n := a.Scored + a.AgentFailed; n > 0 {
			a.SuccessRate = float64(a.Scored) / float64(n)
			a.SuccessLow, a.SuccessHigh = Wilson(a.Scored, n)
		}
		a.MeanScore, _ = MeanStd(scores[name])
		a.Gap, a.GapLow, a.GapHigh = math.NaN(), math.NaN(), math.NaN()
		if ps := parts[name]; len(ps) > 0 {
			t := float64(len(ps))
			sum, se2, dfDen := 0.0, 0.0, 0.0
			for _, p := range ps {
				sum += p.g
				se2 += p.se2
				dfDen += p.se2 * p.se2 / p.df
			}
			a.Gap, a.GapTasks = sum/t, len(ps)
			if se := math.Sqrt(se2) / t; !math.IsNaN(se) {
				half := 0.0
				if se2 > 0 {
					half = tQuantile(0.975, se2*se2/dfDen) * se
				}
				a.GapLow, a.GapHigh = a.Gap-half, a.Gap+half
			}
		}
		out = append(out, a)
	}
	sort.SliceStable(out, func(i, j int) bool { return better(out[i], out[j]) })
	return out
}

// better ranks a before b: a gap closed beats none, then the larger gap,
// then the larger mean score with failures counted (NaN last).
func better(a, b AgentSummary) bool {
	ga, gb := !math.IsNaN(a.Gap), !math.IsNaN(b.Gap)
	switch {
	case ga != gb:
		return ga
	case ga && a.Gap != b.Gap:
		return a.Gap > b.Gap
	}
	return a.MeanScore > b.MeanScore || !math.IsNaN(a.MeanScore) && math.IsNaN(b.MeanScore)
}

// gapLines render the anchors (with their sources unless terse) and the
// benchmark-wide gap closed.
func gapLines(rows []Row, anchors map[string]Anchor, terse bool) []string {
	if len(anchors) == 0 {
		return nil
	}
	var out []string
	for _, g := range Agents(rows) {
		if g.GapTasks > 0 {
			out = append(out, fmt.Sprintf("gap closed, mean over %d tasks with anchors (failures at the baseline): %s %s", g.GapTasks, g.Agent, gapInterval(g.Gap, g.GapLow, g.GapHigh)))
		}
	}
	tasks := make([]string, 0, len(anchors))
	for t := range anchors {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	for _, t := range tasks {
		a := anchors[t]
		flag := ""
		if _, near := a.GapClosed(a.Top); near {
			flag = " (near-zero gap: its share is noise)"
		}
		source := ""
		if a.Source != "" && !terse {
			source = " — " + a.Source
		}
		out = append(out, fmt.Sprintf("anchors %s: baseline %.4f, top %.4f%s%s", t, a.Baseline, a.Top, flag, source))
	}
	return out
}
