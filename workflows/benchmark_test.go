package workflows

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/checkpoint"
)

func TestBenchmarkFansOut(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(agentDone(env, &activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 3,
	}, ck(1, 3)))
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	env.OnActivity(activities.AggregateName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AggregateInput) ([]string, error) {
			if len(in.Runs) != 6 {
				return nil, errors.New("aggregate must get every run")
			}
			return []string{"benchmarks/x/leaderboard.json"}, nil
		})
	env.ExecuteWorkflow(BenchmarkWorkflow, BenchmarkInput{Tasks: []string{"mini_baby_lm", "mini_baby_lm_b"}, Seeds: []int64{1, 2, 3}, Agents: []string{"reference"}, Concurrency: 2, Run: RunInput{Policy: testPolicy}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var r BenchmarkResult
	if err := env.GetWorkflowResult(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 6 || len(r.Leaderboard) != 1 {
		t.Fatalf("%d runs, leaderboard %v", len(r.Runs), r.Leaderboard)
	}
	seen := map[string]bool{}
	for _, run := range r.Runs {
		if run.Outcome != OutcomeScored || seen[run.RunID] {
			t.Fatalf("run %+v", run)
		}
		seen[run.RunID] = true
	}
	if ts := r.Setup.Tasks["mini_baby_lm_b"]; ts.Hardware != "CPU" || ts.TimeLimitS != 30 || r.Setup.Policy.MaxInfraAttempts != 3 {
		t.Fatalf("the leaderboard's setup = %+v", r.Setup)
	}
	if !seen[ChildID(r.BenchmarkID, "reference", "mini_baby_lm_b", 3)] {
		t.Fatalf("child ids are not deterministic: %v", seen)
	}
}

// TestBenchmarkConcurrencyLimit: never more than Concurrency runs at once,
// and the progress query says so while they run.
func TestBenchmarkConcurrencyLimit(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).After(time.Minute).Return(
		agentDone(env, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3)))
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	env.OnActivity(activities.AggregateName, mock.Anything, mock.Anything).Return([]string{"x"}, nil)
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
			n := 0
			for _, st := range p.Children {
				if st == "running" {
					n++
				}
			}
			seen = append(seen, n)
		}, at)
	}
	env.ExecuteWorkflow(BenchmarkWorkflow, BenchmarkInput{Tasks: []string{"a", "b", "c"}, Seeds: []int64{1, 2}, Agents: []string{"reference"}, Concurrency: 2, Run: RunInput{Policy: testPolicy}})
	var r BenchmarkResult
	if err := env.GetWorkflowResult(&r); err != nil || len(r.Runs) != 6 {
		t.Fatalf("%d runs, %v", len(r.Runs), err)
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
	env := newEnv(t)
	const id = "default-test-workflow-id"
	kept := map[string]RunResult{}
	for _, s := range []int64{1, 2} {
		rid := ChildID(id, "reference", "a", s)
		kept[rid] = RunResult{RunID: rid, Task: "a", Agent: "reference", Seed: s, Outcome: OutcomeScored, Score: ptr(0.9)}
	}
	ended := ChildID(id, "reference", "b", 1)
	env.OnActivity(activities.LoadCheckpointName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, src activities.CheckpointSource) (*activities.CheckpointRef, error) {
			switch {
			case src.Seq != 0 || !src.IfAny:
				return nil, errors.New("a continued run asks for its latest checkpoint, if any")
			case src.RunID == ended:
				return &activities.CheckpointRef{RunID: src.RunID, Seq: 5, Attempt: 1, AgentSeconds: 20, Final: true,
					Ending: &checkpoint.Ending{StoppedBy: string(activities.StopDeadline)}}, nil
			case src.RunID == ChildID(id, "reference", "b", 2):
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
	env.OnActivity(activities.AggregateName, mock.Anything, mock.Anything).Return([]string{"x"}, nil)
	env.ExecuteWorkflow(BenchmarkWorkflow, BenchmarkInput{Tasks: []string{"a", "b", "c"}, Seeds: []int64{1, 2}, Agents: []string{"reference"}, Concurrency: 2,
		Run: RunInput{Policy: testPolicy}, Resumed: true, Kept: kept,
		Carried: map[string]Ledger{ChildID(id, "reference", "b", 2): {LostS: 1.5, InfraWaitS: 2, ExtendedS: 60}}})
	var r BenchmarkResult
	if err := env.GetWorkflowResult(&r); err != nil || len(r.Runs) != 6 {
		t.Fatalf("%d runs, %v", len(r.Runs), err)
	}
	if len(agents) != 3 {
		t.Fatalf("the agent ran for %d runs, want 3 (2 kept, 1 only evaluated): %v", len(agents), agents)
	}
	cont := agents[ChildID(id, "reference", "b", 2)]
	if cont.Resume == nil || cont.Resume.Seq != 3 || cont.Attempt != 3 || cont.Budget.UsedS != 10 || cont.NextSeq != 4 {
		t.Fatalf("the continued run must resume checkpoint 3 as attempt 3 with 10 s used: %+v", cont)
	}
	// Its extension came along: 30 s of limit and the 60 s granted before.
	if cont.Budget.GrantedS() != 90 {
		t.Fatalf("the continued run's agent was granted %v s, want 90 (the extension carried across the resume)", cont.Budget.GrantedS())
	}
	if fresh := agents[ChildID(id, "reference", "c", 1)]; fresh.Resume != nil || fresh.Attempt != 1 {
		t.Fatalf("a run without checkpoints starts afresh: %+v", fresh)
	}
	for _, run := range r.Runs {
		switch {
		case kept[run.RunID].Score != nil:
			if *run.Score != 0.9 {
				t.Errorf("kept run %s was replaced: %+v", run.RunID, run)
			}
		case run.RunID == ChildID(id, "reference", "b", 2):
			if run.Budget.LostS != 1.5 || run.Budget.InfraWaitS < 2 || run.Budget.UsedS != 25 || run.Budget.ExtendedS != 60 {
				t.Errorf("the continued run's ledger must carry what it lost before: %+v", run.Budget)
			}
		case run.RunID == ended:
			if run.Outcome != OutcomeLimitReached || run.Attempts != 1 || run.Budget.UsedS != 20 || *run.Score != 0.5 {
				t.Errorf("the ended run must be evaluated as it ended: %+v", run)
			}
		case run.Outcome != OutcomeScored:
			t.Errorf("run %+v", run)
		}
	}
}

func ptr[T any](v T) *T { return &v }
