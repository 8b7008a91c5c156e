// Benchmarks pooled into one population, conflicts named.

// Package campaign pools the runs of several benchmarks into one
// population per task and agent, as `starter results B1 B2 …`, plan,
// report and export read them: yesterday's agent beside today's. Runs
// pool only when they are the same experiment: the same task spec, the
// same evaluator and the same agent definition and image. Anything else
// is refused as one population, naming the conflict, unless the caller
// allows a mixed pool, whose variants are then shown apart.
package campaign

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// Set is one benchmark's runs and setup.
type Set struct {
	ID      string
	Results []runs.Result
	Setup   leaderboard.Setup
}

// Pooled is the population of one or more sets.
type Pooled struct {
	Results []runs.Result
	Setup   leaderboard.Setup
	// Conflicts are the task × agent groups whose runs differ in what
	// makes them one experiment; with a mixed pool their variants are
	// shown apart, each agent labelled with the benchmarks it ran in.
	Conflicts []Conflict
	// Warnings name what differs between the benchmarks but not between
	// runs: their policies (checkpoint interval, attempts).
	Warnings []string
}

// Conflict is one group whose runs are not one experiment.
type Conflict struct {
	Task, Agent string
	// Field is what differs: the task spec hash, the time limit, the
	// hardware, the evaluator digest, the agent definition hash or the
	// agent image digest.
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
	// A run's budget is its own (--time-limit), not its spec's: scores
	// compare only under one budget and one hardware class.
	{"time limit", func(r runs.Result) string {
		if r.TimeLimitS <= 0 {
			return ""
		}
		return time.Duration(r.TimeLimitS * float64(time.Second)).String()
	}},
	{"hardware", func(r runs.Result) string { return r.Hardware }},
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
		for _, r := range s.Results {
			if r.Benchmark == "" {
				r.Benchmark = s.ID
			}
			k := key{r.Task, r.Agent}
			groups[k] = append(groups[k], len(p.Results))
			p.Results = append(p.Results, r)
		}
		if w := mergeSetup(&p.Setup, s); w != "" {
			p.Warnings = append(p.Warnings, w)
		}
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
	slices.SortFunc(p.Conflicts, func(a, b Conflict) int {
		return cmp.Or(cmp.Compare(a.Task, b.Task), cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.Field, b.Field))
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

// mergeSetup adds a benchmark's setup to the pool's: its tasks' budgets
// and hardware, and the first policy; a benchmark whose policy differs
// is named in the warning it returns. (Anchors are the tasks' as they
// are now, added to the pooled setup once.)
func mergeSetup(into *leaderboard.Setup, s Set) string {
	maps.Copy(into.Tasks, s.Setup.Tasks)
	switch {
	case into.Policy == (leaderboard.Policy{}):
		into.Policy = s.Setup.Policy
	case s.Setup.Policy != (leaderboard.Policy{}) && s.Setup.Policy != into.Policy:
		return fmt.Sprintf("benchmark %s ran under another policy (%+v) than the pool's first (%+v): the leaderboard states the first", s.ID, s.Setup.Policy, into.Policy)
	}
	return ""
}
