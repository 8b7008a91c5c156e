package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

var testPolicy = Policy{
	CheckpointInterval: 2 * time.Second, HeartbeatTimeout: 5 * time.Second, Grace: time.Second,
	MaxInfraAttempts: 3, EvalAttempts: 3, LeaseTimeout: time.Minute, EvalWaitLimit: 24 * time.Hour,
}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	a := &activities.Activities{}
	env.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: RunWorkflowName})
	env.RegisterWorkflowWithOptions(BenchmarkWorkflow, workflow.RegisterOptions{Name: BenchmarkWorkflowName})
	env.RegisterActivityWithOptions(a.ResolveTask, activity.RegisterOptions{Name: activities.ResolveTaskName})
	env.RegisterActivityWithOptions(a.AcquireLease, activity.RegisterOptions{Name: activities.AcquireLeaseName})
	env.RegisterActivityWithOptions(a.ReleaseLease, activity.RegisterOptions{Name: activities.ReleaseLeaseName})
	env.RegisterActivityWithOptions(a.RunAgent, activity.RegisterOptions{Name: activities.RunAgentName})
	env.RegisterActivityWithOptions(a.Evaluate, activity.RegisterOptions{Name: activities.EvaluateName})
	env.RegisterActivityWithOptions(a.Aggregate, activity.RegisterOptions{Name: activities.AggregateName})
	env.RegisterActivityWithOptions(a.LoadCheckpoint, activity.RegisterOptions{Name: activities.LoadCheckpointName})
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Get("mini_baby_lm")
	env.OnActivity(activities.ResolveTaskName, mock.Anything, mock.Anything).Return(&activities.ResolvedTask{Spec: *spec, Hash: spec.Hash()}, nil)
	env.OnActivity(activities.AcquireLeaseName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, r activities.LeaseRequest) (*activities.Lease, error) {
			return &activities.Lease{HostID: "h", HostQueue: "mlrb-host-h", Token: r.RunID}, nil
		})
	env.OnActivity(activities.ReleaseLeaseName, mock.Anything, mock.Anything).Return(nil)
	return env
}

func ck(seq int, agentS float64) activities.CheckpointRef {
	return activities.CheckpointRef{Seq: seq, AgentSeconds: agentS, At: time.Unix(1_700_000_000+int64(seq), 0)}
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) RunResult {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var r RunResult
	if err := env.GetWorkflowResult(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

func score(x float64) *activities.EvalResult {
	return &activities.EvalResult{Score: x, Metrics: map[string]float64{"m": x}}
}

func TestScoredRunLedger(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(&activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 12.5, Checkpoints: []activities.CheckpointRef{ck(1, 5), ck(2, 10), ck(3, 12.5)},
	}, nil)
	usd, in := 1.25, int64(1000)
	ev := score(0.81)
	ev.Usage = &activities.Usage{InputTokens: &in, CostUSD: &usd}
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(ev, nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Seed: 7, Policy: testPolicy})
	r := result(t, env)
	if r.Cost.AgentHours != 12.5/3600 || r.Cost.GPUHours != 0 || r.Cost.LLMUSD == nil || *r.Cost.LLMUSD != 1.25 || *r.Cost.LLMInputTokens != 1000 {
		t.Fatalf("cost = %+v", r.Cost)
	}
	if r.Outcome != OutcomeScored || r.Score == nil || *r.Score != 0.81 {
		t.Fatalf("result = %+v", r)
	}
	want := Ledger{GrantedS: 30, UsedS: 12.5}
	if r.Budget.GrantedS != want.GrantedS || r.Budget.UsedS != want.UsedS || r.Budget.LostS != 0 || r.Attempts != 1 || r.Checkpoints != 3 {
		t.Fatalf("budget %+v attempts %d checkpoints %d", r.Budget, r.Attempts, r.Checkpoints)
	}
	if r.SpecHash == "" {
		t.Fatal("no spec hash")
	}
}

func TestTimeLimitOverrideAndDeadline(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			if in.BudgetSeconds != 20 || in.UsedSeconds != 0 || in.Resume != nil || in.NextSeq != 1 {
				return nil, errors.New("unexpected agent input")
			}
			return &activities.AgentResult{StoppedBy: activities.StopDeadline, Signal: 9, AgentSeconds: 20, Checkpoints: []activities.CheckpointRef{ck(1, 20)}}, nil
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.6), nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", TimeLimit: 20 * time.Second, Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != OutcomeLimitReached || r.Score == nil || *r.Score != 0.6 || r.Budget.GrantedS != 20 || r.Budget.Left() != 0 {
		t.Fatalf("result = %+v", r)
	}
}

// TestCrashRefundsLostTime: the first attempt commits a checkpoint at 4 s,
// heartbeats up to 6.5 s and is lost; the 2.5 s past the checkpoint are
// refunded and the second attempt resumes from checkpoint 1.
func TestCrashRefundsLostTime(t *testing.T) {
	env := newEnv(t)
	calls := 0
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			calls++
			if calls == 1 {
				return nil, temporal.NewHeartbeatTimeoutError(activities.Progress{AgentSeconds: 6.5, LastCheckpoint: 1})
			}
			if in.Attempt != 2 || in.Resume == nil || in.Resume.Seq != 1 || in.UsedSeconds != 4 || in.NextSeq != 2 {
				return nil, temporal.NewNonRetryableApplicationError("bad resume input", activities.ErrBadTask, nil)
			}
			return &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 15, Checkpoints: []activities.CheckpointRef{ck(2, 15)}}, nil
		})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(activities.SignalCheckpoint, ck(1, 4))
	}, 0)
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.7), nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != OutcomeScored || r.Attempts != 2 || r.Checkpoints != 2 {
		t.Fatalf("result = %+v", r)
	}
	if r.Budget.LostS != 2.5 || r.Budget.UsedS != 15 {
		t.Fatalf("budget = %+v, want lost 2.5 and used 15", r.Budget)
	}
}

func TestInfraAttemptsRunOut(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(nil, temporal.NewHeartbeatTimeoutError())
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != OutcomeInfraFailed || r.Score != nil || r.Attempts != 3 {
		t.Fatalf("result = %+v", r)
	}
}

func TestAgentFailureIsNotEvaluated(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(&activities.AgentResult{
		StoppedBy: activities.StopExited, ExitCode: 3, Reason: "exit code 3", AgentSeconds: 2, Checkpoints: []activities.CheckpointRef{ck(1, 2)},
	}, nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != OutcomeAgentFailed || r.Score != nil || r.Reason != "agent exit code 3" {
		t.Fatalf("result = %+v", r)
	}
	env.AssertNotCalled(t, activities.EvaluateName, mock.Anything, mock.Anything)
}

func TestEvaluationRetried(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(&activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 3, Checkpoints: []activities.CheckpointRef{ck(1, 3)},
	}, nil)
	tries := 0
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EvalInput) (*activities.EvalResult, error) {
			tries++
			if in.Final.Seq != 1 {
				return nil, temporal.NewNonRetryableApplicationError("wrong checkpoint", activities.ErrBadTask, nil)
			}
			if tries < 3 {
				return nil, errors.New("evaluator crashed")
			}
			return score(0.5), nil
		})
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != OutcomeScored || tries != 3 {
		t.Fatalf("result = %+v after %d tries", r, tries)
	}
}

func TestEvaluationFailureIsNotZero(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(&activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 3, Checkpoints: []activities.CheckpointRef{ck(1, 3)},
	}, nil)
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(nil, errors.New("evaluator image is broken"))
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	// No retry-evaluation came within the wait limit.
	if r.Outcome != OutcomeEvaluationFailed || r.Score != nil || r.EvalTries != 1 || r.Evaluations[0].Error == "" {
		t.Fatalf("result = %+v", r)
	}
}

func TestStatusQuery(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).After(time.Minute).Return(&activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 3, Checkpoints: []activities.CheckpointRef{ck(1, 3)},
	}, nil)
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	var mid Status
	var steer activities.Steering
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(activities.SignalCheckpoint, ck(1, 2))
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryStatus)
		if err != nil {
			t.Error(err)
			return
		}
		if err := v.Get(&mid); err != nil {
			t.Error(err)
		}
		if v, err = env.QueryWorkflow(activities.QuerySteering); err == nil {
			err = v.Get(&steer)
		}
		if err != nil {
			t.Error(err)
		}
	}, 20*time.Second)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	_ = result(t, env)
	if mid.Phase != PhaseRunning || mid.Attempt != 1 || mid.Checkpoints != 1 || mid.Budget.UsedS != 2 || mid.LastCheckpointAt.IsZero() {
		t.Fatalf("mid-run status = %+v", mid)
	}
	if steer.GrantedS != 30 || steer.CancelRequested {
		t.Fatalf("steering = %+v", steer)
	}
}

func TestBenchmarkFansOut(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(&activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 3, Checkpoints: []activities.CheckpointRef{ck(1, 3)},
	}, nil)
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

func TestLedger(t *testing.T) {
	l := Ledger{GrantedS: 100}
	l.Preserve(30)
	l.Preserve(20) // late, out-of-order signal: ignored
	if l.UsedS != 30 || l.Left() != 70 {
		t.Fatalf("%+v", l)
	}
	// Attempt started at 30 s of agent time, reached 42 s, took 50 s of
	// wall time before it was declared lost: 12 s lost, 38 s infra.
	l.Crash(42, 50, 30)
	if l.LostS != 12 || l.InfraWaitS != 38 || l.Left() != 70 {
		t.Fatalf("%+v", l)
	}
	l.Wait(5)
	l.Preserve(100)
	if l.Left() != 0 || l.InfraWaitS != 43 {
		t.Fatalf("%+v", l)
	}
}

// TestRetryEvaluationInPlace: the evaluator fails until retried with a
// fixed image through the update; the agent never runs again.
func TestRetryEvaluationInPlace(t *testing.T) {
	env := newEnv(t)
	agentRuns := 0
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.AgentInput) (*activities.AgentResult, error) {
			agentRuns++
			return &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3, Checkpoints: []activities.CheckpointRef{ck(1, 3)}}, nil
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EvalInput) (*activities.EvalResult, error) {
			if in.Image != "evaluator:fixed" {
				return nil, errors.New("evaluator crashed")
			}
			return &activities.EvalResult{Score: 0.77, Image: "sha256:fixed"}, nil
		})
	var mid Status
	var first, second error
	var got EvalAttempt
	env.RegisterDelayedCallback(func() {
		v, _ := env.QueryWorkflow(QueryStatus)
		_ = v.Get(&mid)
		env.UpdateWorkflow(UpdateRetryEvaluation, "still-broken", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { first = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, RetryEvaluation{Image: "evaluator:still-broken"})
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateRetryEvaluation, "fixed", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { second = err }, OnAccept: func() {},
			OnComplete: func(v any, err error) {
				if a, ok := v.(EvalAttempt); ok {
					got = a
				}
			},
		}, RetryEvaluation{Image: "evaluator:fixed"})
	}, 2*time.Hour)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if mid.Phase != PhaseAwaitingEvalRetry {
		t.Fatalf("phase while waiting = %q", mid.Phase)
	}
	if first != nil || second != nil {
		t.Fatalf("updates rejected: %v, %v", first, second)
	}
	if r.Outcome != OutcomeScored || r.Score == nil || *r.Score != 0.77 || agentRuns != 1 {
		t.Fatalf("result %+v after %d agent runs", r, agentRuns)
	}
	if len(r.Evaluations) != 3 || r.Evaluations[2].Image != "sha256:fixed" || got.Score == nil {
		t.Fatalf("evaluations = %+v, update result %+v", r.Evaluations, got)
	}
}

// TestForkStartsFromAnotherRunsCheckpoint: the first attempt restores the
// source run's checkpoint and inherits the agent time it covers.
func TestForkStartsFromAnotherRunsCheckpoint(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.LoadCheckpointName, mock.Anything, mock.Anything).Return(
		&activities.CheckpointRef{RunID: "run-src", Seq: 3, AgentSeconds: 10}, nil)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			if in.Resume == nil || in.Resume.RunID != "run-src" || in.Resume.Seq != 3 || in.UsedSeconds != 10 {
				return nil, temporal.NewNonRetryableApplicationError("fork input wrong", activities.ErrBadTask, nil)
			}
			return &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 14, Checkpoints: []activities.CheckpointRef{ck(4, 14)}}, nil
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EvalInput) (*activities.EvalResult, error) {
			if in.Final.RunID != "" || in.Final.Seq != 4 {
				return nil, temporal.NewNonRetryableApplicationError("the fork must evaluate its own final checkpoint", activities.ErrBadTask, nil)
			}
			return score(0.6), nil
		})
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", ForkFrom: &ForkSource{RunID: "run-src", Seq: 3}, Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != OutcomeScored || r.Budget.UsedS != 14 || r.Checkpoints != 1 {
		t.Fatalf("result = %+v", r)
	}
}

// TestBenchmarkConcurrencyLimit: never more than Concurrency runs at once,
// and the progress query says so while they run.
func TestBenchmarkConcurrencyLimit(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).After(time.Minute).Return(
		&activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3, Checkpoints: []activities.CheckpointRef{ck(1, 3)}}, nil)
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
					Ending: &checkpoint.Ending{StoppedBy: activities.StopDeadline}}, nil
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
			return &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 25, Checkpoints: []activities.CheckpointRef{ck(9, 25)}}, nil
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	env.OnActivity(activities.AggregateName, mock.Anything, mock.Anything).Return([]string{"x"}, nil)
	env.ExecuteWorkflow(BenchmarkWorkflow, BenchmarkInput{Tasks: []string{"a", "b", "c"}, Seeds: []int64{1, 2}, Agents: []string{"reference"}, Concurrency: 2,
		Run: RunInput{Policy: testPolicy}, Resumed: true, Kept: kept,
		Carried: map[string]Ledger{ChildID(id, "reference", "b", 2): {LostS: 1.5, InfraWaitS: 2}}})
	var r BenchmarkResult
	if err := env.GetWorkflowResult(&r); err != nil || len(r.Runs) != 6 {
		t.Fatalf("%d runs, %v", len(r.Runs), err)
	}
	if len(agents) != 3 {
		t.Fatalf("the agent ran for %d runs, want 3 (2 kept, 1 only evaluated): %v", len(agents), agents)
	}
	cont := agents[ChildID(id, "reference", "b", 2)]
	if cont.Resume == nil || cont.Resume.Seq != 3 || cont.Attempt != 3 || cont.UsedSeconds != 10 || cont.NextSeq != 4 {
		t.Fatalf("the continued run must resume checkpoint 3 as attempt 3 with 10 s used: %+v", cont)
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
			if run.Budget.LostS != 1.5 || run.Budget.InfraWaitS < 2 || run.Budget.UsedS != 25 {
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

// TestHandedBackAttempt: an attempt whose agent was stopped and
// checkpointed (its worker stopping) comes back with the checkpoint; the
// next attempt resumes from it at once and nothing is booked as lost,
// even though the checkpoint's signal never arrived.
func TestHandedBackAttempt(t *testing.T) {
	env := newEnv(t)
	calls := 0
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			calls++
			if calls == 1 {
				ref := ck(3, 7)
				return nil, temporal.NewApplicationError("worker stopping", activities.ErrAgentKilled,
					activities.Progress{AgentSeconds: 7, LastCheckpoint: 3, Checkpoint: &ref})
			}
			if in.Resume == nil || in.Resume.Seq != 3 || in.UsedSeconds != 7 || in.NextSeq != 4 {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("attempt 2 must resume checkpoint 3 at 7 s: %+v", in), activities.ErrBadTask, nil)
			}
			return &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 12, Checkpoints: []activities.CheckpointRef{ck(4, 12)}}, nil
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.6), nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != OutcomeScored || r.Attempts != 2 || r.Budget.LostS != 0 || r.Budget.UsedS != 12 {
		t.Fatalf("result = %+v", r)
	}
}
