// How many seeds a task needs to detect a difference.

package leaderboard

import (
	"fmt"
	"sort"
)

// PlanRow is how many seeds a task needs to detect a difference.
type PlanRow struct {
	Task string `json:"task"`
	// Sigma is the spread the plan assumes and Source where it comes
	// from: the paired σ of differences where two agents share seeds
	// (the largest, over the agent pairs), else the σ of one agent's
	// counted runs (the largest); 0 with no source (fewer than two runs).
	Sigma  float64 `json:"sigma"`
	Source string  `json:"source"`
	// Paired says Need is for a paired t-test over shared seeds (else for
	// a two-sample test).
	Paired bool `json:"paired"`
	// Seeds is the most seeds the source has; MDD the difference they
	// detect now.
	Seeds int     `json:"seeds"`
	MDD   float64 `json:"mdd,omitempty"`
	// Need is the seeds per agent for 80 % power at α = 0.05 (0: unknown).
	Need int `json:"need"`
}

// Plan is, per task of runs, the seeds needed to detect delta: by the
// paired t-test where agents share seeds (benchmarks run every agent on
// the same seeds), else by the two-sample one.
func Plan(runs []Entry, anchors map[string]Anchor, delta float64) []PlanRow {
	byTask := map[string]PlanRow{}
	for _, p := range Paired(runs, anchors) {
		r := byTask[p.Task]
		if p.N >= 2 && (r.Source == "" || p.SD > r.Sigma) {
			r = PlanRow{Task: p.Task, Sigma: p.SD, Seeds: p.N, Paired: true, Source: fmt.Sprintf("σ of %s − %s over %d shared seeds", p.A, p.B, p.N)}
		}
		byTask[p.Task] = r
	}
	for _, row := range Summarise(runs, anchors) {
		r := byTask[row.Task]
		r.Task = row.Task
		if row.Counted >= 2 && !r.Paired && (r.Source == "" || row.FloorStd > r.Sigma) {
			r.Sigma, r.Seeds, r.Source = row.FloorStd, row.Counted, fmt.Sprintf("σ of %s's %d runs (no shared seeds: two-sample)", row.Agent, row.Counted)
		}
		byTask[row.Task] = r
	}
	out := make([]PlanRow, 0, len(byTask))
	for _, r := range byTask {
		switch {
		case r.Source == "":
			r.Source = "unknown: fewer than two runs counted"
		case r.Paired:
			r.Need, r.MDD = PairedSeeds(r.Sigma, delta), PairedMDD(r.Sigma, r.Seeds)
		default:
			r.Need, r.MDD = UnpairedSeeds(r.Sigma, delta), UnpairedMDD(r.Sigma, r.Seeds)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task < out[j].Task })
	return out
}
