// A row per task × agent, and the three classes of run.

package leaderboard

import (
	"math"
	"sort"

	"github.com/mlrb/mlrb/internal/run/runs"
)

// Class is what a run counts as on the leaderboard.
type Class int

// Classes of runs: a score; the agent's own failure (it crashed, left no
// model, or its model broke the rules), counted at the task's floor; or
// a failure the agent could not have caused (infrastructure, the
// evaluator, an operator's cancel), kept apart and never averaged.
const (
	ClassScored Class = iota
	ClassAgentFailed
	ClassApart
)

// ClassOf classes a run by its outcome and score (only scored and
// limit_reached runs carry one).
func ClassOf(o runs.Outcome, score *float64) Class {
	switch {
	case score != nil:
		return ClassScored
	case o == runs.OutcomeAgentFailed || o == runs.OutcomeDisqualified || o == runs.OutcomeHacked:
		return ClassAgentFailed
	}
	return ClassApart
}

// Row summarises one task × agent.
type Row struct {
	Task  string `json:"task"`
	Agent string `json:"agent"`
	// Human is a person's condition ("": an agent's row).
	Human string `json:"human,omitempty"`
	Runs  int    `json:"runs"`
	// Scored runs have a score (scored or limit_reached); AgentFailed are
	// the agent's own failures (agent_failed, disqualified), counted at
	// the floor; Invalid the rest (infra, evaluator, canceled): apart,
	// never averaged.
	Scored       int `json:"scored"`
	AgentFailed  int `json:"agent_failed"`
	Disqualified int `json:"disqualified"`
	// Hacked are the agent's failures by a reviewer's verdict.
	Hacked  int `json:"hacked"`
	Invalid int `json:"invalid"`
	Retried int `json:"retried"` // runs that took more than one agent attempt or evaluation
	// Flagged are the scored runs whose model's check flagged something
	// (Entry.Flags): counted as scored, shown on the board.
	Flagged int `json:"flagged"`
	// SuccessRate is Scored of Scored + AgentFailed, with its 95 % Wilson
	// interval.
	SuccessRate float64 `json:"success_rate"`
	SuccessLow  float64 `json:"success_low"`
	SuccessHigh float64 `json:"success_high"`
	// Mean, Std, SEM, Min and Max are over the scored runs only; CILow
	// and CIHigh their mean's 95 % interval by CIMethod ("t", or
	// "bootstrap" from BootstrapFrom runs).
	Mean     float64 `json:"mean"`
	Std      float64 `json:"std"`
	SEM      float64 `json:"sem"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	CILow    float64 `json:"ci95_low"`
	CIHigh   float64 `json:"ci95_high"`
	CIMethod string  `json:"ci_method"`
	// Floor is the score an agent's failure counts as (the task's
	// baseline anchor, else 0); FloorMean the mean over Counted runs
	// (scored and the agent's failures at Floor), with its t interval.
	Floor     float64 `json:"floor"`
	FloorFrom string  `json:"floor_from"`
	Counted   int     `json:"counted"`
	FloorMean float64 `json:"floor_mean"`
	FloorStd  float64 `json:"floor_std"`
	FloorLow  float64 `json:"floor_ci95_low"`
	FloorHigh float64 `json:"floor_ci95_high"`
	// MDD is the smallest difference from another agent of the same
	// spread and seeds that these runs detect (80 % power, α = 0.05,
	// unpaired, on the counted runs).
	MDD  float64 `json:"-"`
	Cost Total   `json:"cost"`
	// Research is the observed runs' research measures, averaged.
	Research *Research `json:"research,omitempty"`
	// GapClosed is the floor-counted mean's share of its task's anchor gap,
	// in percent, with its interval (NaN without anchors); NearZeroGap
	// flags a gap too small to divide by. Baseline and Top are the anchors.
	GapClosed   float64  `json:"-"`
	GapLow      float64  `json:"-"`
	GapHigh     float64  `json:"-"`
	NearZeroGap bool     `json:"-"`
	Baseline    *float64 `json:"-"`
	Top         *float64 `json:"-"`
}

// FloorOf is the score a task counts an agent's failure as: its baseline
// anchor, else 0, and where that comes from.
func FloorOf(task string, anchors map[string]Anchor) (float64, string) {
	if a, ok := anchors[task]; ok {
		return a.Baseline, "baseline anchor"
	}
	return 0, "0 (no baseline anchor)"
}

// Summarise groups runs by task and agent; anchors give each task's floor
// and gap.
func Summarise(results []Entry, anchors map[string]Anchor) []Row {
	type key struct{ task, agent string }
	groups := map[key][]Entry{}
	for _, r := range results {
		k := key{r.Task, r.Agent}
		groups[k] = append(groups[k], r)
	}
	rows := make([]Row, 0, len(groups))
	for k, rs := range groups {
		rows = append(rows, summariseGroup(k.task, k.agent, rs, anchors))
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Task != rows[j].Task {
			return rows[i].Task < rows[j].Task
		}
		return rows[i].Agent < rows[j].Agent
	})
	return rows
}

func summariseGroup(task, agent string, rs []Entry, anchors map[string]Anchor) Row {
	nan := math.NaN()
	row := Row{Task: task, Agent: agent, Runs: len(rs), Min: math.Inf(1), Max: math.Inf(-1)}
	row.Floor, row.FloorFrom = FloorOf(task, anchors)
	var xs, counted []float64
	for _, r := range rs {
		if r.Human != "" {
			row.Human = r.Human
		}
		row.Cost.Add(r.Cost)
		if r.Attempts > 1 || r.EvalTries > 1 {
			row.Retried++
		}
		switch r.Outcome {
		case runs.OutcomeDisqualified:
			row.Disqualified++
		case runs.OutcomeHacked:
			row.Hacked++
		}
		switch ClassOf(r.Outcome, r.Score) {
		case ClassScored:
			if len(r.Flags) > 0 {
				row.Flagged++
			}
			xs = append(xs, *r.Score)
			counted = append(counted, *r.Score)
			row.Min, row.Max = math.Min(row.Min, *r.Score), math.Max(row.Max, *r.Score)
		case ClassAgentFailed:
			row.AgentFailed++
			counted = append(counted, row.Floor)
		default:
			row.Invalid++
		}
	}
	row.Scored, row.Counted = len(xs), len(counted)
	row.SuccessRate, row.SuccessLow, row.SuccessHigh = nan, nan, nan
	if row.Counted > 0 {
		row.SuccessRate = float64(row.Scored) / float64(row.Counted)
		row.SuccessLow, row.SuccessHigh = Wilson(row.Scored, row.Counted)
	}
	row.Mean, row.Std = MeanStd(xs)
	row.CILow, row.CIHigh, row.CIMethod = MeanInterval(xs)
	if row.Scored > 0 {
		row.SEM = row.Std / math.Sqrt(float64(row.Scored))
	} else {
		row.Min, row.Max, row.SEM = nan, nan, nan
	}
	row.FloorMean, row.FloorStd = MeanStd(counted)
	row.FloorLow, row.FloorHigh = TInterval(counted)
	row.MDD = UnpairedMDD(row.FloorStd, row.Counted)
	row.Research = researchOf(rs)
	row.GapClosed, row.GapLow, row.GapHigh = nan, nan, nan
	if a, ok := anchors[task]; ok {
		b, t := a.Baseline, a.Top
		row.Baseline, row.Top = &b, &t
		row.GapClosed, row.NearZeroGap = a.GapClosed(row.FloorMean)
		lo, _ := a.GapClosed(row.FloorLow)
		hi, _ := a.GapClosed(row.FloorHigh)
		row.GapLow, row.GapHigh = math.Min(lo, hi), math.Max(lo, hi)
	}
	return row
}

// floorSEM is the standard error of a row's floor-counted mean.
func (r Row) floorSEM() float64 {
	if r.Counted < 2 {
		return math.NaN()
	}
	return r.FloorStd / math.Sqrt(float64(r.Counted))
}
