package leaderboard

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Board is everything a leaderboard shows, computed once from its runs
// and setup: the rows per task × agent, the paired comparisons, each
// agent's summary, the cost, and warnings a reader must see.
type Board struct {
	Rows     []Row          `json:"rows"`
	Pairs    []Pair         `json:"paired"`
	Agents   []AgentSummary `json:"agents"`
	Cost     Total          `json:"cost"`
	Warnings []string       `json:"warnings,omitempty"`
	// EqualSpend compares each task's agents at equal dollars spent.
	EqualSpend []SpendLevel `json:"equal_spend,omitempty"`
}

// Build computes the board of runs under setup.
func Build(runs []Entry, setup Setup) Board {
	rows := Summarise(runs, setup.Anchors)
	return Board{Rows: rows, Pairs: Paired(runs, setup.Anchors), Agents: Agents(rows), Cost: CostOf(runs),
		Warnings: anchorWarnings(runs, setup.Anchors), EqualSpend: EqualSpend(runs)}
}

// anchorWarnings name the tasks whose runs were scored by an evaluator
// other than the one that measured their anchors: their gap closed
// compares scores of two evaluators.
func anchorWarnings(runs []Entry, anchors map[string]Anchor) []string {
	other := map[string]map[string]bool{}
	for _, r := range runs {
		a, ok := anchors[r.Task]
		if !ok || len(a.Evaluators) == 0 || r.EvaluatorImage == "" || slices.Contains(a.Evaluators, r.EvaluatorImage) {
			continue
		}
		if other[r.Task] == nil {
			other[r.Task] = map[string]bool{}
		}
		other[r.Task][r.EvaluatorImage] = true
	}
	var out []string
	for _, t := range slices.Sorted(maps.Keys(other)) {
		ds := slices.Sorted(maps.Keys(other[t]))
		out = append(out, fmt.Sprintf("warning: task %s's anchors were measured with evaluator %s, its runs scored with %s: its gap closed compares two evaluators (measure the anchors again: `starter anchors measure %s`)",
			t, strings.Join(anchors[t].Evaluators, ", "), strings.Join(ds, ", "), t))
	}
	return out
}
