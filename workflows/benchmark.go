package workflows

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/leaderboard"
)

// BenchmarkInput fans out runs: every agent × task × seed.
type BenchmarkInput struct {
	Tasks       []string
	Seeds       []int64
	Agents      []string
	Concurrency int
	Run         RunInput // template: Task, Seed and Benchmark are filled per child
	// Resumed marks a benchmark started again under its id: runs not in
	// Kept continue from their checkpoints.
	Resumed bool `json:",omitempty"`
	// Kept are the results an earlier execution already has, by run id.
	Kept map[string]RunResult `json:",omitempty"`
	// Carried is, by run id, what earlier executions of a run to continue
	// lost and waited.
	Carried map[string]Ledger `json:",omitempty"`
}

// BenchmarkResult holds every child's result, in task then seed order,
// and the blob keys of the stored leaderboard.
type BenchmarkResult struct {
	BenchmarkID string      `json:"benchmark_id"`
	Runs        []RunResult `json:"runs"`
	Leaderboard []string    `json:"leaderboard"`
	// Setup is the budgets, hardware and policy the scores were obtained under.
	Setup leaderboard.Setup `json:"setup"`
}

// LeaderboardRuns is what the leaderboard reads of run results.
func LeaderboardRuns(results []RunResult) []leaderboard.Run {
	runs := make([]leaderboard.Run, 0, len(results))
	for _, r := range results {
		runs = append(runs, leaderboard.Run{Task: r.Task, Agent: r.Agent, Seed: r.Seed, Outcome: string(r.Outcome), Score: r.Score,
			Attempts: r.Attempts, EvalTries: r.EvalTries, TimeLimitS: r.TimeLimitS, Hardware: r.Hardware, Cost: r.Cost})
	}
	return runs
}

// Progress counts runs per task and agent ("task/agent") by state, for
// the progress query.
type Progress struct {
	Total int `json:"total"`
	// Done and PerTask derive from Finished and Children when the query
	// answers.
	Done     int                           `json:"done"`
	PerTask  map[string]map[ChildState]int `json:"per_task_agent"`
	Children map[string]ChildState         `json:"children"` // run id -> state
	// Finished holds the results of the runs that ended, in the order they
	// ended: what a leaderboard of a running benchmark is made from.
	Finished []RunResult `json:"finished"`
	// Policy is the benchmark's budget policy, for a leaderboard made
	// while it runs.
	Policy leaderboard.Policy `json:"policy"`
}

// ChildID is a child run's deterministic id: starting the same benchmark
// twice never duplicates a run.
func ChildID(benchmarkID, agent, task string, seed int64) string {
	return fmt.Sprintf("%s/%s/%s/s%d", benchmarkID, agent, task, seed)
}

// ChildRun is one run of a benchmark.
type ChildRun struct {
	Agent, Task string
	Seed        int64
	ID          string
}

// ChildRuns lists a benchmark's runs, every agent × task × seed, in the
// order they start.
func (in BenchmarkInput) ChildRuns(benchmarkID string) []ChildRun {
	var runs []ChildRun
	for _, a := range in.Agents {
		for _, t := range in.Tasks {
			for _, s := range in.Seeds {
				runs = append(runs, ChildRun{a, t, s, ChildID(benchmarkID, a, t, s)})
			}
		}
	}
	return runs
}

// withCounts fills the figures the query derives: the runs done and the
// count per task, agent and state.
func (p Progress) withCounts(jobs []ChildRun) Progress {
	p.Done = len(p.Finished)
	p.PerTask = map[string]map[ChildState]int{}
	for _, j := range jobs {
		k := j.Task + "/" + j.Agent
		if p.PerTask[k] == nil {
			p.PerTask[k] = map[ChildState]int{}
		}
		p.PerTask[k][p.Children[j.ID]]++
	}
	return p
}

// BenchmarkWorkflow runs the children at most Concurrency at a time.
func BenchmarkWorkflow(ctx workflow.Context, in BenchmarkInput) (*BenchmarkResult, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	jobs := in.ChildRuns(id)
	prog := Progress{Total: len(jobs), Children: map[string]ChildState{}, Policy: in.Run.Policy.Leaderboard()}
	finished := func(j ChildRun, res RunResult) {
		prog.Finished = append(prog.Finished, res)
		prog.Children[j.ID] = Ended(res.Outcome)
	}
	for _, j := range jobs {
		prog.Children[j.ID] = ChildQueued
		if res, ok := in.Kept[j.ID]; ok {
			finished(j, res)
		}
	}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (Progress, error) {
		return prog.withCounts(jobs), nil
	}); err != nil {
		return nil, fmt.Errorf("progress query: %w", err)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, SABenchmark.ValueSet(id), SAAgent.ValueSet(strings.Join(in.Agents, ","))); err != nil {
		return nil, fmt.Errorf("search attributes: %w", err)
	}
	limit := in.Concurrency
	if limit <= 0 {
		limit = 4
	}
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
			prog.Children[j.ID] = ChildRunning
			running++
			sel.AddFuture(f, func(f workflow.Future) {
				var res RunResult
				if err := f.Get(ctx, &res); err != nil {
					res = RunResult{RunID: j.ID, Task: j.Task, Agent: j.Agent, Seed: j.Seed, Outcome: OutcomeInfraFailed, Reason: err.Error()}
				}
				finished(j, res)
				running--
			})
		}
		sel.Select(ctx)
	}
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
	runs := LeaderboardRuns(out.Runs)
	out.Setup = leaderboard.SetupOf(runs, prog.Policy)
	if err := workflow.ExecuteActivity(aggregateOptions(ctx), activities.AggregateName, activities.AggregateInput{BenchmarkID: id, Runs: runs, Setup: out.Setup}).Get(ctx, &out.Leaderboard); err != nil {
		workflow.GetLogger(ctx).Warn("leaderboard not stored", "error", err)
	}
	return out, nil
}
