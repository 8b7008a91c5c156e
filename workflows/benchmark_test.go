package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/resume"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

func TestBenchmarkFansOut(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(agentDone(env, &activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 3,
	}, ck(1, 3)))
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	env.OnActivity(activities.AggregateResultsName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AggregateResultsInput) (*activities.AggregateResult, error) {
			res, _ := stored(env)
			if len(in.Runs.Runs()) != 6 || len(res) != 6 {
				return nil, errors.New("aggregate must get every run, each stored")
			}
			return &activities.AggregateResult{Keys: []string{"benchmarks/x/leaderboard.json"}, Setup: leaderboard.Setup{Policy: in.Policy}}, nil
		})
	env.ExecuteWorkflow(BenchmarkWorkflow, BenchmarkInput{Tasks: []string{"mini_baby_lm", "mini_baby_lm_b"}, Seeds: []int64{1, 2, 3}, Agents: []string{"reference"}, Concurrency: 2, Run: RunInput{Policy: testPolicy}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var r BenchmarkResult
	if err := env.GetWorkflowResult(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 0 || len(r.Leaderboard) != 1 || r.Total != 6 || r.Ended["mini_baby_lm_b/reference"][runs.StateOf(runs.OutcomeScored)] != 3 {
		t.Fatalf("result %+v", r)
	}
	res, puts := stored(env)
	if puts != 6 {
		t.Fatalf("%d results stored, want 6", puts)
	}
	for id, run := range res {
		if run.Outcome != runs.OutcomeScored || run.RunID != id {
			t.Fatalf("run %+v", run)
		}
	}
	if r.Setup.Policy.MaxInfraAttempts != 3 {
		t.Fatalf("the leaderboard's setup = %+v", r.Setup)
	}
	if _, ok := res[runresults.RunID(r.BenchmarkID, "reference", "mini_baby_lm_b", 3)]; !ok {
		t.Fatalf("child ids are not deterministic: %v", res)
	}
}

// TestBenchmarkContinuesAsNew: an execution starts its share of runs and
// continues as new, carrying the runs under way; the next waits for them
// (AwaitRuns) and starts the rest; every run is counted once.
func TestBenchmarkContinuesAsNew(t *testing.T) {
	in := BenchmarkInput{Tasks: []string{"a", "b"}, Seeds: []int64{1, 2, 3}, Agents: []string{"reference"}, Concurrency: 3, ContinueAfter: 4, Run: RunInput{Policy: testPolicy}}
	const id = "default-test-workflow-id"
	all := in.ChildRuns(id)
	var mu sync.Mutex
	startedRuns := map[string]int{}
	var carried []string
	for exec := 1; ; exec++ {
		if exec > 4 {
			t.Fatal("the benchmark never ended")
		}
		env := newEnv(t)
		env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).After(time.Minute).Return(
			func(ctx context.Context, a activities.AgentInput) (*activities.AgentResult, error) {
				mu.Lock()
				startedRuns[a.RunID]++
				mu.Unlock()
				return agentDone(env, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3))(ctx, a)
			})
		env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
		env.OnActivity(activities.AwaitRunsName, mock.Anything, mock.Anything).After(30 * time.Second).Return(
			func(_ context.Context, ids []string) ([]runs.End, error) {
				if !slices.Equal(ids, carried) {
					return nil, fmt.Errorf("awaited %v, want the carried %v", ids, carried)
				}
				ends := []runs.End{}
				for _, rid := range ids {
					ends = append(ends, runs.End{RunID: rid, Outcome: runs.OutcomeScored})
				}
				return ends, nil
			})
		env.OnActivity(activities.AggregateResultsName, mock.Anything, mock.Anything).Return(
			func(_ context.Context, a activities.AggregateResultsInput) (*activities.AggregateResult, error) {
				if !slices.Equal(a.Runs.Runs(), all) {
					return nil, fmt.Errorf("aggregate got %+v", a.Runs)
				}
				return &activities.AggregateResult{Keys: []string{"k"}}, nil
			})
		env.ExecuteWorkflow(BenchmarkWorkflow, in)
		err := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if !errors.As(err, &can) {
			if err != nil {
				t.Fatal(err)
			}
			var r BenchmarkResult
			if err := env.GetWorkflowResult(&r); err != nil {
				t.Fatal(err)
			}
			if r.Ended["a/reference"][runs.StateOf(runs.OutcomeScored)] != 3 || r.Ended["b/reference"][runs.StateOf(runs.OutcomeScored)] != 3 || exec != 2 {
				t.Fatalf("execution %d ended with %+v", exec, r)
			}
			break
		}
		var next BenchmarkInput
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
			t.Fatal(err)
		}
		// Four started, three at a time: one ended, three under way.
		if st := next.State; st == nil || st.Next != 4 || len(st.Running) != 3 || st.Execution != exec || st.Ended["a/reference"][runs.StateOf(runs.OutcomeScored)] != 1 {
			t.Fatalf("carried state %+v", next.State)
		}
		carried, in = next.State.Running, next
	}
	// The runs under way were abandoned, never terminated, by the first
	// execution's end, and the second did not start them again.
	for _, r := range all {
		if startedRuns[r.ID] != 1 {
			t.Errorf("run %s started %d times", r.ID, startedRuns[r.ID])
		}
	}
}

// TestBenchmarkConcurrencyLimit: never more than Concurrency runs at once,
// and the progress query says so while they run.
func TestBenchmarkConcurrencyLimit(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).After(time.Minute).Return(
		agentDone(env, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3)))
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	env.OnActivity(activities.AggregateResultsName, mock.Anything, mock.Anything).Return(&activities.AggregateResult{Keys: []string{"x"}}, nil)
	var seen []int
	for _, at := range []time.Duration{30 * time.Second, 90 * time.Second, 150 * time.Second} {
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(QueryProgress)
			if err != nil {
				t.Error(err)
				return
			}
			var p Progress
			if err := v.Get(&p); err != nil {
				t.Error(err)
				return
			}
			if len(p.Running) != p.RunningTotal {
				t.Errorf("progress lists %d of %d running runs", len(p.Running), p.RunningTotal)
			}
			seen = append(seen, p.RunningTotal)
		}, at)
	}
	env.ExecuteWorkflow(BenchmarkWorkflow, BenchmarkInput{Tasks: []string{"a", "b", "c"}, Seeds: []int64{1, 2}, Agents: []string{"reference"}, Concurrency: 2, Run: RunInput{Policy: testPolicy}})
	if _, n := stored(env); n != 6 {
		t.Fatalf("%d runs stored, want 6", n)
	}
	// Six one-minute runs, two at a time: two run in each minute.
	if !slices.Equal(seen, []int{2, 2, 2}) {
		t.Fatalf("progress saw %v running; want 2 throughout", seen)
	}
}

// TestBenchmarkResume: a resumed benchmark keeps the results it has,
// evaluates a run whose agent had ended without starting it again, and
// continues the rest from their checkpoints.
func TestBenchmarkResume(t *testing.T) {
	t.Run("plan in the store", func(t *testing.T) { testBenchmarkResume(t, true) })
	// A resume started by a starter from before the plans passes its
	// kept results and carried ledgers in the input.
	t.Run("kept and carried in the input", func(t *testing.T) { testBenchmarkResume(t, false) })
}

func testBenchmarkResume(t *testing.T, inStore bool) {
	env := newEnv(t)
	const id = "default-test-workflow-id"
	kept := map[string]runs.Result{}
	for _, s := range []int64{1, 2} {
		rid := runresults.RunID(id, "reference", "a", s)
		kept[rid] = runs.Result{RunID: rid, Task: "a", Agent: "reference", Seed: s, Outcome: runs.OutcomeScored, Score: ptr(0.9)}
	}
	ended := runresults.RunID(id, "reference", "b", 1)
	env.OnActivity(activities.LoadCheckpointName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, src activities.CheckpointSource) (*activities.CheckpointRef, error) {
			switch {
			case src.Seq != 0 || !src.IfAny:
				return nil, errors.New("a continued run asks for its latest checkpoint, if any")
			case src.RunID == ended:
				return &activities.CheckpointRef{RunID: src.RunID, Seq: 5, Attempt: 1, AgentSeconds: 20, Final: true,
					Ending: &checkpoint.Ending{StoppedBy: string(activities.StopDeadline)}}, nil
			case src.RunID == runresults.RunID(id, "reference", "b", 2):
				return &activities.CheckpointRef{RunID: src.RunID, Seq: 3, Attempt: 2, AgentSeconds: 10}, nil
			}
			return nil, nil
		})
	var mu sync.Mutex
	agents := map[string]activities.AgentInput{}
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			mu.Lock()
			agents[in.RunID] = in
			mu.Unlock()
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 25}, ck(9, 25))
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	env.OnActivity(activities.AggregateResultsName, mock.Anything, mock.Anything).Return(&activities.AggregateResult{Keys: []string{"x"}}, nil)
	// The plan is read from the store a window at a time, never passed in.
	plan := resume.Entries{runresults.RunID(id, "reference", "b", 2): {Carried: &budget.Account{LostS: 1.5, InfraWaitS: 2, ExtendedS: 60}}}
	for rid, res := range kept {
		plan[rid] = resume.Entry{Outcome: string(res.Outcome)}
	}
	env.OnActivity(activities.ReadPlanName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ReadPlanInput) (map[string]resume.Entry, error) {
			if in.Key != "benchmarks/x/resume/1.json" || len(in.RunIDs) != 6 {
				return nil, fmt.Errorf("read plan %+v", in)
			}
			out := map[string]resume.Entry{}
			for _, rid := range in.RunIDs {
				if e, ok := plan[rid]; ok {
					out[rid] = e
				}
			}
			return out, nil
		})
	in := BenchmarkInput{Tasks: []string{"a", "b", "c"}, Seeds: []int64{1, 2}, Agents: []string{"reference"}, Concurrency: 2,
		Run: RunInput{Policy: testPolicy}, Resumed: true, Plan: "benchmarks/x/resume/1.json"}
	if !inStore {
		in.Plan, in.Kept, in.Carried = "", kept, map[string]budget.Account{runresults.RunID(id, "reference", "b", 2): *plan[runresults.RunID(id, "reference", "b", 2)].Carried}
	}
	env.ExecuteWorkflow(BenchmarkWorkflow, in)
	var r BenchmarkResult
	if err := env.GetWorkflowResult(&r); err != nil || r.Ended["a/reference"][runs.StateOf(runs.OutcomeScored)] != 2 {
		t.Fatalf("%+v, %v", r, err)
	}
	results, _ := stored(env)
	for rid, res := range kept {
		results[rid] = res
	}
	if len(results) != 6 {
		t.Fatalf("%d results, want 6", len(results))
	}
	if len(agents) != 3 {
		t.Fatalf("the agent ran for %d runs, want 3 (2 kept, 1 only evaluated): %v", len(agents), agents)
	}
	cont := agents[runresults.RunID(id, "reference", "b", 2)]
	if cont.Resume == nil || cont.Resume.Seq != 3 || cont.Attempt != 3 || cont.Budget.UsedS != 10 || cont.NextSeq != 4 {
		t.Fatalf("the continued run must resume checkpoint 3 as attempt 3 with 10 s used: %+v", cont)
	}
	// Its extension came along: 30 s of limit and the 60 s granted before.
	if cont.Budget.GrantedS() != 90 {
		t.Fatalf("the continued run's agent was granted %v s, want 90 (the extension carried across the resume)", cont.Budget.GrantedS())
	}
	if fresh := agents[runresults.RunID(id, "reference", "c", 1)]; fresh.Resume != nil || fresh.Attempt != 1 {
		t.Fatalf("a run without checkpoints starts afresh: %+v", fresh)
	}
	for _, run := range results {
		switch {
		case kept[run.RunID].Score != nil:
			if *run.Score != 0.9 {
				t.Errorf("kept run %s was replaced: %+v", run.RunID, run)
			}
		case run.RunID == runresults.RunID(id, "reference", "b", 2):
			if run.Budget.LostS != 1.5 || run.Budget.InfraWaitS < 2 || run.Budget.UsedS != 25 || run.Budget.ExtendedS != 60 {
				t.Errorf("the continued run's ledger must carry what it lost before: %+v", run.Budget)
			}
		case run.RunID == ended:
			if run.Outcome != runs.OutcomeLimitReached || run.Attempts != 1 || run.Budget.UsedS != 20 || *run.Score != 0.5 {
				t.Errorf("the ended run must be evaluated as it ended: %+v", run)
			}
		case run.Outcome != runs.OutcomeScored:
			t.Errorf("run %+v", run)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestAwaitingRunsFreeTheirSlots: a run whose evaluation fails waits for
// an operator's retry without its benchmark slot, so the next run starts
// at once instead of after the wait limit (24 h here); the waiting run
// still ends and is counted.
func TestAwaitingRunsFreeTheirSlots(t *testing.T) {
	env := newEnv(t)
	started := map[string]time.Time{}
	var mu sync.Mutex
	t0 := env.Now()
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			mu.Lock()
			started[in.Task.ID+"/"+in.RunID] = env.Now()
			mu.Unlock()
			return agentDone(env, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3))(ctx, in)
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EvalInput) (*activities.EvalResult, error) {
			if strings.Contains(in.RunID, "/broken/") {
				return nil, errors.New("evaluator image broken")
			}
			return score(0.5), nil
		})
	env.OnActivity(activities.AggregateResultsName, mock.Anything, mock.Anything).Return(&activities.AggregateResult{}, nil)
	env.ExecuteWorkflow(BenchmarkWorkflow, BenchmarkInput{Tasks: []string{"broken", "good"}, Seeds: []int64{1}, Agents: []string{"reference"}, Concurrency: 1, Run: RunInput{Policy: testPolicy}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var r BenchmarkResult
	if err := env.GetWorkflowResult(&r); err != nil {
		t.Fatal(err)
	}
	if r.Ended["broken/reference"][runs.StateOf(runs.OutcomeEvaluationFailed)] != 1 || r.Ended["good/reference"][runs.StateOf(runs.OutcomeScored)] != 1 {
		t.Fatalf("ended %+v", r.Ended)
	}
	var good time.Time
	for k, at := range started {
		if strings.Contains(k, "/good/") {
			good = at
		}
	}
	if good.IsZero() || good.Sub(t0) > time.Hour {
		t.Fatalf("the next run started %s after the benchmark, behind a run waiting for a retry", good.Sub(t0))
	}
}
