// Package campaign pools the runs of several benchmarks into one
// population per task and agent, as `starter results B1 B2 …`, plan,
// report and export read them: yesterday's agent beside today's. Runs
// pool only when they are the same experiment: the same task spec, the
// same evaluator and the same agent definition and image. Anything else
// is refused as one population, naming the conflict, unless the caller
// allows a mixed pool, whose variants are then shown apart.
package campaign

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mlrb/mlrb/internal/leaderboard"
	"github.com/mlrb/mlrb/internal/runs"
)

// Set is one benchmark's runs and setup.
type Set struct {
	ID      string
	Results []runs.Result
	Setup   leaderboard.Setup
}

// Pooled is the population of one or more sets.
type Pooled struct {
	// IDs are the benchmarks pooled, in the order given.
	IDs     []string
	Results []runs.Result
	Setup   leaderboard.Setup
	// Conflicts are the task × agent groups whose runs differ in what
	// makes them one experiment; with a mixed pool their variants are
	// shown apart, each agent labelled with the benchmarks it ran in.
	Conflicts []Conflict
}

// Conflict is one group whose runs are not one experiment.
type Conflict struct {
	Task, Agent string
	// Field is what differs: the task spec hash, the evaluator digest,
	// the agent definition hash or the agent image digest.
	Field string
	// Values maps each value to the benchmarks whose runs have it.
	Values map[string][]string
}

func (c Conflict) String() string {
	vals := make([]string, 0, len(c.Values))
	for v, ids := range c.Values {
		vals = append(vals, fmt.Sprintf("%s in %s", short(v), strings.Join(ids, ", ")))
	}
	sort.Strings(vals)
	return fmt.Sprintf("task %s, agent %s: the %s differs (%s)", c.Task, c.Agent, c.Field, strings.Join(vals, "; "))
}

func short(v string) string {
	if i := strings.LastIndex(v, "sha256:"); i >= 0 && len(v) > i+7+12 {
		return v[:i+7+12]
	}
	return v
}

// ConflictError refuses a pool whose runs are not one experiment.
type ConflictError struct{ Conflicts []Conflict }

func (e *ConflictError) Error() string {
	lines := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		lines[i] = c.String()
	}
	return fmt.Sprintf("these runs are not one population:\n  %s\npool them only with --allow-mixed (each variant shown apart, its agent labelled with its benchmarks), or compare the benchmarks one at a time",
		strings.Join(lines, "\n  "))
}

// identity are what a run's group must agree on, each named.
var identity = []struct {
	field string
	of    func(r runs.Result) string
}{
	{"task spec hash", func(r runs.Result) string { return r.SpecHash }},
	{"evaluator digest", func(r runs.Result) string { return r.EvaluatorImage }},
	{"agent definition", func(r runs.Result) string {
		if r.AgentDef == nil {
			return ""
		}
		return r.AgentDef.Hash
	}},
	{"agent image digest", func(r runs.Result) string {
		if r.AgentDef != nil && r.AgentDef.Image != "" {
			return r.AgentDef.Image
		}
		return r.AgentImage
	}},
}

// Pool pools the sets. A value a run does not have (an infra failure has
// no evaluator) agrees with any. A pool of one benchmark is never
// refused (an evaluation retried with another image is the operator's
// choice): its conflicts are returned for a warning.
func Pool(sets []Set, allowMixed bool) (*Pooled, error) {
	p := &Pooled{Setup: leaderboard.Setup{Tasks: map[string]leaderboard.TaskSetup{}}}
	type key struct{ task, agent string }
	groups := map[key][]int{}
	for _, s := range sets {
		p.IDs = append(p.IDs, s.ID)
		for _, r := range s.Results {
			if r.Benchmark == "" {
				r.Benchmark = s.ID
			}
			k := key{r.Task, r.Agent}
			groups[k] = append(groups[k], len(p.Results))
			p.Results = append(p.Results, r)
		}
		mergeSetup(&p.Setup, s.Setup)
	}
	mixed := map[key]bool{}
	for k, idx := range groups {
		for _, id := range identity {
			vals := map[string][]string{}
			for _, i := range idx {
				r := p.Results[i]
				if v := id.of(r); v != "" && !slices.Contains(vals[v], r.Benchmark) {
					vals[v] = append(vals[v], r.Benchmark)
				}
			}
			if len(vals) > 1 {
				p.Conflicts = append(p.Conflicts, Conflict{Task: k.task, Agent: k.agent, Field: id.field, Values: vals})
				mixed[k] = true
			}
		}
	}
	sort.Slice(p.Conflicts, func(i, j int) bool {
		a, b := p.Conflicts[i], p.Conflicts[j]
		if a.Task != b.Task {
			return a.Task < b.Task
		}
		if a.Agent != b.Agent {
			return a.Agent < b.Agent
		}
		return a.Field < b.Field
	})
	if len(p.Conflicts) == 0 || len(sets) == 1 {
		return p, nil
	}
	if !allowMixed {
		return nil, &ConflictError{Conflicts: p.Conflicts}
	}
	// Shown apart: a group's variants are its benchmarks' runs.
	for k, idx := range groups {
		if mixed[k] {
			for _, i := range idx {
				p.Results[i].Agent = fmt.Sprintf("%s [%s]", k.agent, p.Results[i].Benchmark)
			}
		}
	}
	return p, nil
}

// mergeSetup adds a benchmark's setup to the pool's: tasks' budgets and
// hardware, anchors, and the first policy (a differing one is a
// conflict the runs' spec hashes do not show; it is named in the notes).
func mergeSetup(into *leaderboard.Setup, s leaderboard.Setup) {
	for t, ts := range s.Tasks {
		into.Tasks[t] = ts
	}
	if into.Policy == (leaderboard.Policy{}) {
		into.Policy = s.Policy
	}
	for t, a := range s.Anchors {
		if into.Anchors == nil {
			into.Anchors = map[string]leaderboard.Anchor{}
		}
		into.Anchors[t] = a
	}
}
