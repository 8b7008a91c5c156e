package leaderboard

import (
	"fmt"
	"math"
	"sort"
)

// Anchor is a task's baseline and top scores and where they come from.
type Anchor struct {
	Baseline float64 `json:"baseline"`
	Top      float64 `json:"top"`
	// Source says how each was obtained: the runs and evaluator that
	// measured it, or a citation.
	Source string `json:"source,omitempty"`
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

// WithAnchors sets each row's gap closed from its task's anchors.
func WithAnchors(rows []Row, anchors map[string]Anchor) []Row {
	for i := range rows {
		rows[i].GapClosed = math.NaN()
		a, ok := anchors[rows[i].Task]
		if !ok {
			continue
		}
		b, t := a.Baseline, a.Top
		rows[i].Baseline, rows[i].Top = &b, &t
		if rows[i].Scored > 0 {
			rows[i].GapClosed, rows[i].NearZeroGap = a.GapClosed(rows[i].Mean)
		} else {
			_, rows[i].NearZeroGap = a.GapClosed(math.NaN())
		}
	}
	return rows
}

// AgentGap is one agent's gap closed averaged over the tasks that have
// anchors and a score (the benchmark-wide figure).
type AgentGap struct {
	Agent string  `json:"agent"`
	Mean  float64 `json:"mean_gap_closed_pct"`
	Tasks int     `json:"tasks"`
}

// GapMeans averages each agent's gap closed over its tasks.
func GapMeans(rows []Row) []AgentGap {
	sum, n := map[string]float64{}, map[string]int{}
	for _, r := range rows {
		if !math.IsNaN(r.GapClosed) && !math.IsInf(r.GapClosed, 0) {
			sum[r.Agent] += r.GapClosed
			n[r.Agent]++
		}
	}
	out := make([]AgentGap, 0, len(n))
	for a, k := range n {
		out = append(out, AgentGap{Agent: a, Mean: sum[a] / float64(k), Tasks: k})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Agent < out[j].Agent })
	return out
}

// gapLines render the anchors and the benchmark-wide gap closed.
func gapLines(rows []Row, anchors map[string]Anchor) []string {
	if len(anchors) == 0 {
		return nil
	}
	var out []string
	for _, g := range GapMeans(rows) {
		out = append(out, fmt.Sprintf("gap closed, mean over %d tasks with anchors: %s %.1f %%", g.Tasks, g.Agent, g.Mean))
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
		if a.Source != "" {
			source = " — " + a.Source
		}
		out = append(out, fmt.Sprintf("anchors %s: baseline %.4f, top %.4f%s%s", t, a.Baseline, a.Top, flag, source))
	}
	return out
}

// gapRows are the rows' gap closed as lines (the chart's, which draws
// raw means).
func gapRows(rows []Row) []string {
	var out []string
	for _, r := range rows {
		if r.Baseline != nil {
			out = append(out, fmt.Sprintf("gap closed %s/%s: %s %%", r.Task, r.Agent, gapCell(r)))
		}
	}
	return out
}
