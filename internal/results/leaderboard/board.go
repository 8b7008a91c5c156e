// Board is everything a leaderboard shows, computed once from its runs and setup.

package leaderboard

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/internal/run/runs"
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
	// Runs and Setup are what it was built from (the JSON rendering
	// carries them).
	Runs  []Entry `json:"-"`
	Setup Setup   `json:"-"`
}

// Build computes the board of runs under setup.
func Build(runs []Entry, setup Setup) Board {
	rows := Summarise(runs, setup.Anchors)
	agents := Agents(rows)
	for i := range agents {
		agents[i].Certified = setup.Certified[agents[i].Agent]
	}
	return Board{Rows: rows, Pairs: Paired(runs, setup.Anchors), Agents: agents, Cost: CostOf(runs),
		Warnings: append(anchorWarnings(runs, setup.Anchors), flagLines(runs)...), EqualSpend: EqualSpend(runs), Runs: runs, Setup: setup}
}

// flagLines name each run whose model's check changed its row, with
// why: the rules a disqualified run's model broke (it counts at the
// floor), and the flags beside a score that stands.
func flagLines(entries []Entry) []string {
	var out []string
	for _, r := range entries {
		switch {
		case r.Outcome == runs.OutcomeDisqualified && len(r.Violations) > 0:
			out = append(out, fmt.Sprintf("disqualified: %s %s seed %d (run %s): %s", r.Task, r.Agent, r.Seed, r.RunID, strings.Join(r.Violations, "; ")))
		case len(r.Flags) > 0 && r.Score != nil:
			out = append(out, fmt.Sprintf("flagged: %s %s seed %d (run %s): %s", r.Task, r.Agent, r.Seed, r.RunID, strings.Join(r.Flags, "; ")))
		}
	}
	return out
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
