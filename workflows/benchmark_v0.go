// The first BenchmarkWorkflow's shape, kept for histories that replay it.

package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// progressV0 is benchmarkV0's answer to the progress query: every run's
// state and result.
type progressV0 struct {
	Total    int                                `json:"total"`
	Done     int                                `json:"done"`
	PerTask  map[string]map[runs.ChildState]int `json:"per_task_agent"`
	Children map[string]runs.ChildState         `json:"children"`
	Finished []runs.Result                      `json:"finished"`
	Policy   leaderboard.Policy                 `json:"policy"`
}

// withCounts fills the figures the query derives: the runs done and the
// count per task, agent and state.
func (p progressV0) withCounts(jobs []runresults.Child) progressV0 {
	p.Done = len(p.Finished)
	p.PerTask = map[string]map[runs.ChildState]int{}
	for _, j := range jobs {
		k := j.Pair()
		if p.PerTask[k] == nil {
			p.PerTask[k] = map[runs.ChildState]int{}
		}
		p.PerTask[k][p.Children[j.ID]]++
	}
	return p
}

// benchmarkV0 is BenchmarkWorkflow as benchmarks started before
// versionBoundedBenchmark run it: every result kept in its state and
// returned in one payload. Remove it once no such benchmark is open.
func benchmarkV0(ctx workflow.Context, in BenchmarkInput) (*BenchmarkResult, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	jobs := in.ChildRuns(id)
	prog := progressV0{Total: len(jobs), Children: map[string]runs.ChildState{}, Policy: in.Run.Policy.Leaderboard()}
	finished := func(j runresults.Child, res runs.Result) {
		prog.Finished = append(prog.Finished, res)
		prog.Children[j.ID] = runs.StateOf(res.Outcome)
	}
	for _, j := range jobs {
		prog.Children[j.ID] = runs.ChildQueued
		if res, ok := in.Kept[j.ID]; ok {
			finished(j, res)
		}
	}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (progressV0, error) {
		return prog.withCounts(jobs), nil
	}); err != nil {
		return nil, fmt.Errorf("progress query: %w", err)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, SABenchmark.ValueSet(id), SAAgent.ValueSet(strings.Join(in.Agents, ","))); err != nil {
		return nil, fmt.Errorf("search attributes: %w", err)
	}
	limit := cmp.Or(max(in.Concurrency, 0), 4)
	running := 0
	sel := workflow.NewSelector(ctx)
	next := 0
	for len(prog.Finished) < len(jobs) {
		for running < limit && next < len(jobs) {
			j := jobs[next]
			next++
			if _, ok := in.Kept[j.ID]; ok {
				continue
			}
			ri := in.Run
			ri.Task, ri.Seed, ri.Agent, ri.Benchmark, ri.Continue = j.Task, j.Seed, j.Agent, id, in.Resumed
			if c, ok := in.Carried[j.ID]; ok {
				ri.Carried = &c
			}
			cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
				WorkflowID: j.ID,
				Memo:       map[string]any{"task": j.Task, "agent": j.Agent, "seed": j.Seed, "benchmark": id},
			})
			f := workflow.ExecuteChildWorkflow(cctx, RunWorkflowName, ri)
			prog.Children[j.ID] = runs.ChildRunning
			running++
			sel.AddFuture(f, func(f workflow.Future) {
				var res runs.Result
				if err := f.Get(ctx, &res); err != nil {
					res = runs.Result{RunID: j.ID, Task: j.Task, Agent: j.Agent, Seed: j.Seed, Outcome: runs.OutcomeInfraFailed, Reason: err.Error()}
				}
				finished(j, res)
				running--
			})
		}
		sel.Select(ctx)
	}
	return resultV0(ctx, id, prog), nil
}

// resultV0 is a version 0 benchmark's result: every run's result, sorted,
// and the leaderboard an activity computed and stored from them.
func resultV0(ctx workflow.Context, id string, prog progressV0) *BenchmarkResult {
	out := &BenchmarkResult{BenchmarkID: id, Runs: slices.Clone(prog.Finished)}
	sort.Slice(out.Runs, func(a, b int) bool {
		x, y := out.Runs[a], out.Runs[b]
		if x.Task != y.Task {
			return x.Task < y.Task
		}
		if x.Agent != y.Agent {
			return x.Agent < y.Agent
		}
		return x.Seed < y.Seed
	})
	// The leaderboard comes from the run results, never from hand-made
	// tables: an activity computes and stores it.
	board := leaderboard.RunsOf(out.Runs)
	out.Setup = leaderboard.SetupOf(board, prog.Policy)
	keys, err := aggregate.call(ctx, callArgs{}, activities.AggregateInput{BenchmarkID: id, Runs: board, Setup: out.Setup})
	if err != nil {
		workflow.GetLogger(ctx).Warn("leaderboard not stored", "error", err)
	}
	out.Leaderboard = keys
	return out
}
