package workflows

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

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
		runs = append(runs, leaderboard.Run{Task: r.Task, Agent: r.Agent, Seed: r.Seed, Outcome: r.Outcome, Score: r.Score,
			Attempts: r.Attempts, EvalTries: r.EvalTries, TimeLimitS: r.TimeLimitS, Hardware: r.Hardware})
	}
	return runs
}

// Progress counts runs per task and agent ("task/agent") by state, for
// the progress query.
type Progress struct {
	Total    int                       `json:"total"`
	Done     int                       `json:"done"` // len(Finished), filled in by the query
	PerTask  map[string]map[string]int `json:"per_task_agent"`
	Children map[string]string         `json:"children"` // run id -> state
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

// BenchmarkWorkflow runs the children at most Concurrency at a time.
func BenchmarkWorkflow(ctx workflow.Context, in BenchmarkInput) (*BenchmarkResult, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	type job struct {
		agent string
		task  string
		seed  int64
		id    string
	}
	var jobs []job
	for _, a := range in.Agents {
		for _, t := range in.Tasks {
			for _, s := range in.Seeds {
				jobs = append(jobs, job{a, t, s, ChildID(id, a, t, s)})
			}
		}
	}
	prog := Progress{Total: len(jobs), PerTask: map[string]map[string]int{}, Children: map[string]string{}, Policy: in.Run.Policy.Leaderboard()}
	mark := func(j job, from, to string) {
		k := j.task + "/" + j.agent
		if prog.PerTask[k] == nil {
			prog.PerTask[k] = map[string]int{}
		}
		if from != "" {
			prog.PerTask[k][from]--
		}
		prog.PerTask[k][to]++
		prog.Children[j.id] = to
	}
	finished := func(j job, from string, res RunResult) {
		prog.Finished = append(prog.Finished, res)
		mark(j, from, res.Outcome)
	}
	for _, j := range jobs {
		mark(j, "", "queued")
		if res, ok := in.Kept[j.id]; ok {
			finished(j, "queued", res)
		}
	}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (Progress, error) {
		p := prog
		p.Done = len(prog.Finished)
		return p, nil
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
			if _, ok := in.Kept[j.id]; ok {
				continue
			}
			ri := in.Run
			ri.Task, ri.Seed, ri.Agent, ri.Benchmark, ri.Continue = j.task, j.seed, j.agent, id, in.Resumed
			if c, ok := in.Carried[j.id]; ok {
				ri.Carried = &c
			}
			cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
				WorkflowID: j.id,
				Memo:       map[string]any{"task": j.task, "agent": j.agent, "seed": j.seed, "benchmark": id},
			})
			f := workflow.ExecuteChildWorkflow(cctx, RunWorkflowName, ri)
			mark(j, "queued", "running")
			running++
			sel.AddFuture(f, func(f workflow.Future) {
				var res RunResult
				if err := f.Get(ctx, &res); err != nil {
					res = RunResult{RunID: j.id, Task: j.task, Agent: j.agent, Seed: j.seed, Outcome: OutcomeInfraFailed, Reason: err.Error()}
				}
				finished(j, "running", res)
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
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 10}})
	runs := LeaderboardRuns(out.Runs)
	out.Setup = leaderboard.SetupOf(runs, prog.Policy)
	if err := workflow.ExecuteActivity(actx, activities.AggregateName, activities.AggregateInput{BenchmarkID: id, Runs: runs, Setup: out.Setup}).Get(ctx, &out.Leaderboard); err != nil {
		workflow.GetLogger(ctx).Warn("leaderboard not stored", "error", err)
	}
	return out, nil
}
