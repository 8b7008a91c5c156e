// Research is a task × agent's research measures.

package leaderboard

import (
	"math"
	"strconv"
)

// Research is a task × agent's research measures: each the mean over its
// observed runs (Runs of them) that have it; nil where none has.
type Research struct {
	Runs               int      `json:"runs"`
	ExperimentsPerHour float64  `json:"experiments_per_hour"`
	GPUBusyShare       *float64 `json:"gpu_busy_share,omitempty"`
	FirstModelS        *float64 `json:"first_model_s,omitempty"`
	// NoModelRuns counts observed runs whose checkpoints never held a model.
	NoModelRuns     int     `json:"no_model_runs"`
	LongestStallS   float64 `json:"longest_stall_s"`
	GPUHoursNoModel float64 `json:"gpu_hours_no_model"`
	CutOffHours     float64 `json:"cut_off_hours"`
}

// researchOf averages the observed runs' measures (nil: none observed).
func researchOf(rs []Entry) *Research {
	var per, busy, first, stall, none, cut []float64
	out := &Research{}
	for _, r := range rs {
		m := r.Research
		if m == nil {
			continue
		}
		out.Runs++
		per, stall = append(per, m.PerHour), append(stall, m.LongestStallS)
		none, cut = append(none, m.GPUHoursNoModel), append(cut, m.CutOffHours)
		if m.GPUBusyShare != nil {
			busy = append(busy, *m.GPUBusyShare)
		}
		if m.FirstModelS != nil {
			first = append(first, *m.FirstModelS)
		} else {
			out.NoModelRuns++
		}
	}
	if out.Runs == 0 {
		return nil
	}
	out.ExperimentsPerHour, out.GPUBusyShare, out.FirstModelS = mean(per), meanOf(busy), meanOf(first)
	out.LongestStallS, out.GPUHoursNoModel, out.CutOffHours = mean(stall), mean(none), mean(cut)
	return out
}

// meanOf is the mean, nil of none.
func meanOf(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	m := mean(xs)
	return &m
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// researchCell is a row's research at a glance, for Markdown.
func researchCell(r *Research) string {
	if r == nil {
		return "—"
	}
	busy, first := "—", "—"
	if r.GPUBusyShare != nil {
		busy = num(*r.GPUBusyShare*100) + " %"
	}
	if r.FirstModelS != nil {
		first = num(*r.FirstModelS/3600) + " h"
	}
	return num(r.ExperimentsPerHour) + " / " + busy + " / " + first
}

// researchColumns are the research measures' CSV columns.
var researchColumns = []string{"observed_runs", "experiments_per_hour", "gpu_busy_share", "first_model_s", "no_model_runs", "longest_stall_s", "gpu_hours_no_model", "cut_off_hours"}

func researchRecord(r *Research) []string {
	if r == nil {
		return []string{"0", "", "", "", "", "", "", ""}
	}
	return []string{itoa(r.Runs), num(r.ExperimentsPerHour), optNum(r.GPUBusyShare), optNum(r.FirstModelS), itoa(r.NoModelRuns), num(r.LongestStallS), num(r.GPUHoursNoModel), num(r.CutOffHours)}
}

func itoa(n int) string { return strconv.Itoa(n) }
