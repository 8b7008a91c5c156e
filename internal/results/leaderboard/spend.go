// Agents compared at one spend.

package leaderboard

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
)

// SpendLevel is a task's agents compared at one spend: each agent's
// mean, over the runs that had a scored mark by then, of the best score
// reached by that many dollars (GPUs and LLM calls, from the curve).
type SpendLevel struct {
	Task   string         `json:"task"`
	USD    float64        `json:"usd"`
	Agents []AgentAtSpend `json:"agents"`
}

// AgentAtSpend is one agent's best score by a spend; Reached counts the
// runs that had a scored mark by then, of Runs.
type AgentAtSpend struct {
	Agent   string   `json:"agent"`
	Mean    *float64 `json:"mean,omitempty"`
	Reached int      `json:"reached"`
	Runs    int      `json:"runs"`
}

// EqualSpend compares the agents of each task at a quarter, half and all
// of the least any of them typically spends (the smallest of the
// agents' median spend at their last mark), so that every agent has
// spent that much: each agent's best score reached by each spend. Tasks
// with one agent, or without costed marks, are left out.
func EqualSpend(runs []Entry) []SpendLevel {
	byTask := map[string]map[string][]Entry{}
	for _, r := range runs {
		if !costed(r) {
			continue
		}
		if byTask[r.Task] == nil {
			byTask[r.Task] = map[string][]Entry{}
		}
		byTask[r.Task][r.Agent] = append(byTask[r.Task][r.Agent], r)
	}
	var out []SpendLevel
	for _, task := range sortedKeys(byTask) {
		agents := byTask[task]
		if len(agents) < 2 {
			continue
		}
		least := math.Inf(1)
		for _, rs := range agents {
			var spent []float64
			for _, r := range rs {
				spent = append(spent, *r.Curve[len(r.Curve)-1].CostUSD)
			}
			sort.Float64s(spent)
			least = math.Min(least, spent[len(spent)/2])
		}
		for _, f := range []float64{0.25, 0.5, 1} {
			lvl := SpendLevel{Task: task, USD: least * f}
			for _, a := range sortedKeys(agents) {
				lvl.Agents = append(lvl.Agents, atSpend(a, agents[a], lvl.USD))
			}
			out = append(out, lvl)
		}
	}
	return out
}

// costed: the run's every mark has its cost.
func costed(r Entry) bool {
	return len(r.Curve) > 0 && !slices.ContainsFunc(r.Curve, func(m Mark) bool { return m.CostUSD == nil })
}

func atSpend(agent string, rs []Entry, usd float64) AgentAtSpend {
	a := AgentAtSpend{Agent: agent, Runs: len(rs)}
	var sum float64
	for _, r := range rs {
		best := math.Inf(-1)
		for _, m := range r.Curve {
			if *m.CostUSD <= usd+1e-9 && m.Score != nil {
				best = math.Max(best, *m.Score)
			}
		}
		if !math.IsInf(best, -1) {
			sum += best
			a.Reached++
		}
	}
	if a.Reached > 0 {
		m := sum / float64(a.Reached)
		a.Mean = &m
	}
	return a
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// WriteEqualSpend prints the comparison as Markdown.
func WriteEqualSpend(w io.Writer, levels []SpendLevel) {
	if len(levels) == 0 {
		return
	}
	fmt.Fprintln(w, "| task | spend (GPU + LLM) | agent: best score by then (runs that had one) |")
	fmt.Fprintln(w, "|---|---:|---|")
	for _, l := range levels {
		cells := ""
		for i, a := range l.Agents {
			if i > 0 {
				cells += "; "
			}
			cells += fmt.Sprintf("%s: %s (%d of %d)", a.Agent, optNum(a.Mean), a.Reached, a.Runs)
		}
		fmt.Fprintf(w, "| %s | $%.2f | %s |\n", l.Task, l.USD, cells)
	}
}
