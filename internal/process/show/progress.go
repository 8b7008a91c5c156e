// A benchmark's progress and a run under way as `starter watch` shows them.

package show

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/workflows"
)

// sortedKeys: a map shown in its keys' order.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ProgressLine is a benchmark's progress in one line: a Bar and the
// runs in each state (the demo's StatusOf).
func ProgressLine(w io.Writer, p workflows.Progress) {
	states := map[runs.ChildState]int{}
	for _, per := range p.PerTask {
		for s, n := range per {
			states[s] += n
		}
	}
	var parts []string
	for _, s := range sortedKeys(states) {
		if n := states[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	fmt.Fprintf(w, "%s %d/%d  %s\n", Bar(float64(p.Done)/float64(max(p.Total, 1)), 30), p.Done, p.Total, strings.Join(parts, ", "))
}

// WriteProgress is a benchmark's progress as watch shows it: a Bar per
// task and agent, then the runs under way.
func WriteProgress(w io.Writer, id string, p workflows.Progress, live map[string]workflows.Status, now time.Time) {
	fmt.Fprintf(w, "benchmark %s: %d of %d runs done\n\n", id, p.Done, p.Total)
	fmt.Fprintf(w, "%-40s %-24s %6s %7s %6s %6s\n", "task/agent", "progress", "queued", "running", "scored", "failed")
	for _, k := range sortedKeys(p.PerTask) {
		n := p.PerTask[k]
		total, scored := 0, n[runs.StateOf(runs.OutcomeScored)]+n[runs.StateOf(runs.OutcomeLimitReached)]
		for _, v := range n {
			total += v
		}
		done := total - n[runs.ChildQueued] - n[runs.ChildRunning]
		fmt.Fprintf(w, "%-40s %s %3d/%-3d %6d %7d %6d %6d\n", k, Bar(float64(done)/float64(max(total, 1)), 16), done, total,
			n[runs.ChildQueued], n[runs.ChildRunning], scored, done-scored)
	}
	if len(live) > 0 {
		more := ""
		if p.RunningTotal > len(p.Running) {
			more = fmt.Sprintf(" (the first %d of %d)", len(p.Running), p.RunningTotal)
		}
		fmt.Fprintf(w, "\nunder way%s:\n", more)
	}
	for _, rid := range sortedKeys(live) {
		fmt.Fprintf(w, "  %s\n", LiveLine(StatusOf(live[rid], now), live[rid]))
		WriteWaiting(w, "    ", live[rid].Waiting)
	}
}

// LiveLine is one run under way: phase, attempt, budget left and how old
// its last checkpoint is (the work a crash now would cost).
func LiveLine(v Status, st workflows.Status) string {
	age := "no checkpoint yet"
	if v.LastCheckpointAgeS != nil {
		age = fmt.Sprintf("last checkpoint %.1fs ago", *v.LastCheckpointAgeS)
	}
	stale := ""
	if v.CheckpointStale {
		stale = " STALE"
	}
	return fmt.Sprintf("%-44s %-26s attempt %d  budget left %7.1fs  %d checkpoints, %s%s",
		st.RunID, v.Phase, v.Attempt, v.BudgetLeftS, v.Checkpoints, age, stale)
}

// Bar is frac of width as #s.
func Bar(frac float64, width int) string {
	n := int(min(max(frac, 0), 1)*float64(width) + 0.5)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// AgentClock prints agent seconds as h:mm:ss.
func AgentClock(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	return fmt.Sprintf("%d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

// WriteRun is a run under way as watch shows it: its budget as a bar,
// its live line, a failing checkpoint and why it waits.
func WriteRun(w io.Writer, st workflows.Status, now time.Time) {
	v := StatusOf(st, now)
	fmt.Fprintf(w, "run %s (%s, agent %s, seed %d)\n", st.RunID, st.Task, st.Agent, st.Seed)
	used := 1 - v.BudgetLeftS/max(st.Budget.GrantedS(), 1)
	fmt.Fprintf(w, "budget  %s %.1fs left of %.0fs\n", Bar(used, 30), v.BudgetLeftS, st.Budget.GrantedS())
	fmt.Fprintf(w, "%s\n", LiveLine(v, st))
	if v.CheckpointFailures > 0 {
		fmt.Fprintf(w, "checkpoint failing (%d in a row): %s\n", v.CheckpointFailures, v.CheckpointError)
	}
	WriteWaiting(w, "", v.Waiting)
}
