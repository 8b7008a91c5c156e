// BenchmarkInput fans out runs.

package workflows

import (
	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// The benchmark's payloads: its input, carried state, result and progress.

// BenchmarkInput fans out runs: every agent × task × seed.
type BenchmarkInput struct {
	Tasks  []string
	Seeds  []int64
	Agents []string
	// AgentDefs are the agents' definitions by name (none in benchmarks
	// from before definitions: built-in agents by name); Images their
	// images by digest, pinned when the benchmark started.
	AgentDefs   map[string]agents.Definition `json:",omitempty"`
	Images      map[string]string            `json:",omitempty"`
	Concurrency int
	Run         RunInput // template: Task, Seed and Benchmark are filled per child
	// Resumed marks a benchmark started again under its id: runs not in
	// Kept continue from their checkpoints.
	Resumed bool `json:",omitempty"`
	// Kept are the results an earlier execution already has, by run id.
	Kept map[string]runs.Result `json:",omitempty"`
	// Carried is, by run id, what earlier executions of a run to continue
	// lost and waited.
	Carried map[string]budget.Account `json:",omitempty"`
	// Plan is the blob key of a resumed benchmark's plan (which runs keep
	// their results, what the others carry), read a window at a time:
	// Kept and Carried grew with the benchmark; the input must not.
	Plan string `json:",omitempty"`
	// ContinueAfter is how many runs one execution starts before it
	// continues as new (0: DefaultContinueAfter), so that a benchmark's
	// history stays bounded however many runs it has.
	ContinueAfter int `json:",omitempty"`
	// State is where an execution that continued as new left off.
	State *BenchmarkState `json:",omitempty"`
}

// DefaultContinueAfter keeps a benchmark execution's history under
// about 9,000 events (a run costs 3 events of its own and at most two
// workflow tasks of 3: the recorded histories show 6 to 8) and, with a
// full task's result of about 4 KB in each run's completion event, under
// 5 MB of Temporal's 50 MB.
const DefaultContinueAfter = 1000

// BenchmarkState is what a benchmark carries into its next execution:
// bounded by the number of task × agent pairs and the concurrency, never
// by the number of runs.
type BenchmarkState struct {
	// Next is the index of the next run to start, in ChildRuns order.
	Next int
	// Ended counts ended runs by task/agent and outcome.
	Ended map[string]map[runs.ChildState]int
	// Running are runs an earlier execution started that had not ended;
	// Parked those of them that wait for an operator's retry (no slot).
	Running []string `json:",omitempty"`
	Parked  []string `json:",omitempty"`
	// Execution counts the executions so far (the first is 1).
	Execution int
}

// BenchmarkResult is a benchmark's summary and the blob keys of its
// stored leaderboard; each run's result is in the blob store
// (runresults.Key), never in this payload.
type BenchmarkResult struct {
	BenchmarkID string `json:"benchmark_id"`
	// Runs holds every result in benchmarks started before results were
	// stored per run; empty since.
	Runs        []runs.Result `json:"runs,omitempty"`
	Leaderboard []string      `json:"leaderboard"`
	// Setup is the budgets, hardware and policy the scores were obtained under.
	Setup leaderboard.Setup `json:"setup"`
	Total int               `json:"total,omitempty"`
	// Ended counts runs by task/agent and outcome.
	Ended map[string]map[runs.ChildState]int `json:"ended,omitempty"`
	// Missing counts runs with no stored result when the leaderboard was made.
	Missing int `json:"missing,omitempty"`
}

// Progress is the answer to the progress query: counts per task and
// agent ("task/agent") by state, and one page of the runs under way. Its
// size follows the number of task × agent pairs and the page, never the
// number of runs: results are read from the blob store.
type Progress struct {
	Total   int                                `json:"total"`
	Done    int                                `json:"done"`
	PerTask map[string]map[runs.ChildState]int `json:"per_task_agent"`
	// Running is a page of the runs under way, sorted, from the page's
	// offset; RunningTotal counts them all.
	Running      []string `json:"running"`
	RunningTotal int      `json:"running_total"`
	// Policy is the benchmark's budget policy, for a leaderboard made
	// while it runs.
	Policy leaderboard.Policy `json:"policy"`
	// Execution is the benchmark's execution (it continues as new).
	Execution int `json:"execution"`
}

// ProgressPage picks the page of running runs the progress query
// returns; a query without it gets the first DefaultProgressPage.
type ProgressPage struct {
	Offset int
	Limit  int
}

// DefaultProgressPage and MaxProgressPage bound the runs one progress
// answer lists: a few kilobytes, far below Temporal's payload limit.
const (
	DefaultProgressPage = 100
	MaxProgressPage     = 1000
)

// Matrix names the benchmark's runs, for payloads that must not list them.
func (in BenchmarkInput) Matrix(benchmarkID string) runresults.Matrix {
	return runresults.Matrix{BenchmarkID: benchmarkID, Agents: in.Agents, Tasks: in.Tasks, Seeds: in.Seeds}
}

// ChildRuns lists a benchmark's runs, every agent × task × seed, in the
// order they start.
func (in BenchmarkInput) ChildRuns(benchmarkID string) []runresults.Child {
	return in.Matrix(benchmarkID).Runs()
}

// DefaultConcurrency is how many runs a benchmark runs at once when its
// input says nothing.
const DefaultConcurrency = 4

// NewBenchmarkInput is the benchmark of every task × agent × seed 1 to
// seeds, each agent by its definition, each run driven by run: one constructor for the starter's
// benchmark and demo and for bench/load.
func NewBenchmarkInput(tasks []string, defs []agents.Definition, seeds, concurrency int, run RunInput) BenchmarkInput {
	in := BenchmarkInput{Tasks: tasks, Concurrency: concurrency, Run: run, AgentDefs: map[string]agents.Definition{}}
	for _, d := range defs {
		in.Agents = append(in.Agents, d.Name)
		in.AgentDefs[d.Name] = d
	}
	for s := 1; s <= seeds; s++ {
		in.Seeds = append(in.Seeds, int64(s))
	}
	return in
}
