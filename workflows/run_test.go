package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/tasks"
)

var testPolicy = Policy{
	CheckpointInterval: 2 * time.Second, HeartbeatTimeout: 5 * time.Second, Grace: time.Second,
	MaxInfraAttempts: 3, EvalAttempts: 3, LeaseTimeout: time.Minute, EvalWaitLimit: 24 * time.Hour,
	// The curve has tests of its own (curve_test.go).
	NoCurve: true,
}

func newEnv(t *testing.T) *testsuite.TestWorkflowEnvironment { return newEnvResolvingIn(t, 0) }

// newEnvResolvingIn is a test environment whose task resolution takes d.
func newEnvResolvingIn(t *testing.T, d time.Duration) *testsuite.TestWorkflowEnvironment {
	return newEnvLeasing(t, d, func(_ context.Context, r activities.LeaseRequest) (*activities.Lease, error) {
		return &activities.Lease{HostID: "h", HostQueue: "mlrb-host-h", Token: r.RunID + "#" + r.Role, Devices: []int{3}}, nil
	})
}

// newTestEnv is the SDK's test environment with its deadlock bound (a
// workflow task that does not yield within 1 s) raised to a minute: CI
// runs these tests beside the end-to-end suite, which keeps both cores
// busy, and a task descheduled for a second is not a deadlock. A real
// one (a workflow blocked outside the SDK) still fails.
func newTestEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	return env
}

// newEnvLeasing is a test environment whose leases lease answers.
func newEnvLeasing(t *testing.T, d time.Duration, lease func(context.Context, activities.LeaseRequest) (*activities.Lease, error)) *testsuite.TestWorkflowEnvironment {
	env := newTestEnv()
	Register(env, &Set{})
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Get("mini_baby_lm")
	env.OnActivity(activities.ResolveTaskName, mock.Anything, mock.Anything).After(d).Return(&activities.ResolvedTask{Spec: *spec, Hash: spec.Hash()}, nil)
	env.OnActivity(activities.AcquireLeaseName, mock.Anything, mock.Anything).Return(lease)
	env.OnActivity(activities.ReleaseLeaseName, mock.Anything, mock.Anything).Return(nil)
	st := &storedResults{byID: map[string]runs.Result{}}
	storedOf.Store(env, st)
	env.OnActivity(activities.StoreResultName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.StoreResultInput) error {
			var r runs.Result
			if err := json.Unmarshal(in.Result, &r); err != nil {
				return err
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			st.byID[in.RunID] = r
			st.puts++
			return nil
		})
	return env
}

// storedResults are the results runs stored (the StoreResult activity).
type storedResults struct {
	mu   sync.Mutex
	byID map[string]runs.Result
	puts int
}

var storedOf sync.Map // env -> *storedResults

// stored returns the results the runs of env stored, by run id, and how
// many stores there were.
func stored(env *testsuite.TestWorkflowEnvironment) (map[string]runs.Result, int) {
	v, _ := storedOf.Load(env)
	st := v.(*storedResults)
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.byID), st.puts
}

func ck(seq int, agentS float64) activities.CheckpointRef {
	return activities.CheckpointRef{Seq: seq, AgentSeconds: agentS, At: time.Unix(1_700_000_000+int64(seq), 0)}
}

// committed does what the agent activity does with an attempt's
// checkpoints: one signal per commit, all delivered before it returns res,
// which carries the last one instead when the run asks (LastInResult).
func committed(env *testsuite.TestWorkflowEnvironment, in activities.AgentInput, res *activities.AgentResult, refs ...activities.CheckpointRef) (*activities.AgentResult, error) {
	if in.LastInResult && res != nil && len(refs) > 0 {
		out, last := *res, refs[len(refs)-1]
		out.Final, res, refs = &last, &out, refs[:len(refs)-1]
	}
	return signalled(env, in, res, refs...)
}

// signalled is committed as a worker from before LastInResult does it:
// every checkpoint a signal.
func signalled(env *testsuite.TestWorkflowEnvironment, in activities.AgentInput, res *activities.AgentResult, refs ...activities.CheckpointRef) (*activities.AgentResult, error) {
	for _, r := range refs {
		if err := env.SignalWorkflowByID(in.RunID, activities.SignalCheckpoint, r); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// agentDone is a RunAgent mock whose attempt commits refs and returns res.
func agentDone(env *testsuite.TestWorkflowEnvironment, res *activities.AgentResult, refs ...activities.CheckpointRef) func(context.Context, activities.AgentInput) (*activities.AgentResult, error) {
	return func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
		return committed(env, in, res, refs...)
	}
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) runs.Result {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var r runs.Result
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
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(agentDone(env, &activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 12.5,
	}, ck(1, 5), ck(2, 10), ck(3, 12.5)))
	usd, in := 1.25, int64(1000)
	ev := score(0.81)
	ev.Usage = &contract.SelfReport{InputTokens: &in, CostUSD: &usd}
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(ev, nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Seed: 7, Policy: testPolicy})
	r := result(t, env)
	if r.Cost.AgentHours != 12.5/3600 || r.Cost.GPUHours != 0 || r.Cost.LLMUSD == nil || *r.Cost.LLMUSD != 1.25 || *r.Cost.LLMInputTokens != 1000 {
		t.Fatalf("cost = %+v", r.Cost)
	}
	if r.Outcome != runs.OutcomeScored || r.Score == nil || *r.Score != 0.81 {
		t.Fatalf("result = %+v", r)
	}
	want := budget.Account{LimitS: 30, UsedS: 12.5}
	if r.Budget.GrantedS() != want.GrantedS() || r.Budget.UsedS != want.UsedS || r.Budget.LostS != 0 || r.Attempts != 1 || r.Checkpoints != 3 {
		t.Fatalf("budget %+v attempts %d checkpoints %d", r.Budget, r.Attempts, r.Checkpoints)
	}
	if r.SpecHash == "" {
		t.Fatal("no spec hash")
	}
}

// TestLastCheckpointInTheResult: an attempt's final checkpoint and
// ledger come in its result, after the checkpoints it signalled, and are
// the run's as if signalled; a worker from before (everything signalled,
// LastInResult ignored) gives the same result.
func TestLastCheckpointInTheResult(t *testing.T) {
	prices := llm.PriceRef{SHA256: "abc", Date: "2025-08-01"}
	var l llm.Ledger
	l.Record("gpt-4o", llm.Usage{Calls: 4, USD: 0.5})
	usage := &activities.UsageReport{Attempt: 1, Ledger: l, Prices: prices}
	for name, agent := range map[string]func(*testsuite.TestWorkflowEnvironment, activities.AgentInput) (*activities.AgentResult, error){
		"in the result": func(env *testsuite.TestWorkflowEnvironment, in activities.AgentInput) (*activities.AgentResult, error) {
			if !in.LastInResult {
				return nil, errors.New("the run did not ask for its last checkpoint in the result")
			}
			last := ck(3, 12.5)
			_, err := signalled(env, in, nil, ck(1, 5), ck(2, 10))
			return &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 12.5, Final: &last, Usage: usage}, err
		},
		"signalled by an older worker": func(env *testsuite.TestWorkflowEnvironment, in activities.AgentInput) (*activities.AgentResult, error) {
			if err := env.SignalWorkflowByID(in.RunID, activities.SignalUsage, *usage); err != nil {
				return nil, err
			}
			return signalled(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 12.5}, ck(1, 5), ck(2, 10), ck(3, 12.5))
		},
	} {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t)
			env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
					return agent(env, in)
				})
			env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.EvalInput) (*activities.EvalResult, error) {
					if in.Final.Seq != 3 {
						return nil, fmt.Errorf("evaluated checkpoint #%d, want the last, #3", in.Final.Seq)
					}
					return score(0.7), nil
				})
			env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
			r := result(t, env)
			if r.Outcome != runs.OutcomeScored || r.Checkpoints != 3 || r.Budget.UsedS != 12.5 {
				t.Fatalf("result %+v", r)
			}
			if c := r.Cost; c.LLM == nil || c.LLM.Calls != 4 || c.LLM.USD != 0.5 || c.LLMPrices == nil || *c.LLMPrices != prices {
				t.Fatalf("cost %+v", r.Cost)
			}
		})
	}
}

func TestTimeLimitOverrideAndDeadline(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			if in.Budget.GrantedS() != 20 || in.Budget.UsedS != 0 || in.Resume != nil || in.NextSeq != 1 {
				return nil, errors.New("unexpected agent input")
			}
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopDeadline, Signal: 9, AgentSeconds: 20}, ck(1, 20))
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.6), nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", TimeLimit: 20 * time.Second, Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != runs.OutcomeLimitReached || r.Score == nil || *r.Score != 0.6 || r.Budget.GrantedS() != 20 || r.Budget.Left() != 0 {
		t.Fatalf("result = %+v", r)
	}
}

func TestStatusQuery(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).After(time.Minute).Return(agentDone(env, &activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 3,
	}, ck(1, 3)))
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
	if mid.Phase != runs.PhaseRunning || mid.Attempt != 1 || mid.Checkpoints != 1 || mid.Budget.UsedS != 2 || mid.LastCheckpointAt.IsZero() {
		t.Fatalf("mid-run status = %+v", mid)
	}
	if steer.GrantedS != 30 || steer.CancelRequested {
		t.Fatalf("steering = %+v", steer)
	}
}

func TestLedger(t *testing.T) {
	l := budget.Account{LimitS: 100}
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

// TestExtendWhileResolving: an extension accepted before the task is
// resolved (its time limit not yet known) is kept when the limit is set:
// the agent gets the limit plus the extension.
func TestExtendWhileResolving(t *testing.T) {
	env := newEnvResolvingIn(t, 10*time.Second)
	var granted float64
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			granted = in.Budget.GrantedS()
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 35}, ck(1, 35))
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	var accepted error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateExtend, "extend", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { accepted = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, Extend{By: 10 * time.Second})
	}, 5*time.Second)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if accepted != nil {
		t.Fatalf("extend while resolving was rejected: %v", accepted)
	}
	if granted != 40 || r.Budget.GrantedS() != 40 || r.Budget.ExtendedS != 10 || r.TimeLimitS != 30 || r.Budget.Left() != 5 {
		t.Fatalf("agent granted %v; result budget %+v, limit %v", granted, r.Budget, r.TimeLimitS)
	}
}

// TestReachedAt: the agent time a running attempt reached, shown between
// checkpoints and booked as lost when the run is cut off.
func TestReachedAt(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		st   Status
		now  time.Duration
		want float64
	}{
		{"not running: what checkpoints preserved", Status{Phase: runs.PhaseLeasing, Budget: budget.Account{UsedS: 40}}, time.Minute, 40},
		{"since the attempt's start", Status{Phase: runs.PhaseRunning, AttemptStartedAt: t0, Budget: budget.Account{UsedS: 40}}, 5 * time.Second, 45},
		{"since the later last checkpoint", Status{Phase: runs.PhaseRunning, AttemptStartedAt: t0, LastCheckpointAt: t0.Add(10 * time.Second), Budget: budget.Account{UsedS: 50}}, 12 * time.Second, 52},
		{"an older checkpoint than the attempt", Status{Phase: runs.PhaseRunning, AttemptStartedAt: t0, LastCheckpointAt: t0.Add(-time.Hour), Budget: budget.Account{UsedS: 50}}, 3 * time.Second, 53},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.st.ReachedAt(t0.Add(c.now)); got != c.want {
				t.Fatalf("reached %v, want %v", got, c.want)
			}
		})
	}
}

// TestCheckpointIntervalBound: an interval that would put more than
// MaxCheckpointsPerRun checkpoints in a budget is refused, naming the
// least interval that fits.
func TestCheckpointIntervalBound(t *testing.T) {
	for _, c := range []struct {
		interval, granted time.Duration
		ok                bool
	}{
		{10 * time.Minute, 24 * time.Hour, true},
		{44 * time.Second, 24 * time.Hour, true},
		{10 * time.Second, 24 * time.Hour, false},
		{43 * time.Second, 24 * time.Hour, false},
		{3 * time.Second, 30 * time.Second, true},
		{0, time.Minute, false},
	} {
		err := Policy{CheckpointInterval: c.interval}.CheckInterval(c.granted)
		if (err == nil) != c.ok {
			t.Errorf("interval %s, budget %s: %v", c.interval, c.granted, err)
		}
		if err != nil && c.interval > 0 && !strings.Contains(err.Error(), "set it to 44s or more") {
			t.Errorf("the error must name the least interval: %v", err)
		}
	}
}

// TestZeroCheckpointIntervalDefaulted (audit N9): a run started without
// the starter's checks and a zero checkpoint interval checkpoints at the
// default, rather than failing in its agent's activity; the mini task's
// own 3 s is the shorter, and stands.
func TestZeroCheckpointIntervalDefaulted(t *testing.T) {
	env := newEnv(t)
	var got time.Duration
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			got = in.Interval
			return agentDone(env, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3))(ctx, in)
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(score(0.5), nil)
	pol := testPolicy
	pol.CheckpointInterval = 0
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: pol})
	if r := result(t, env); r.Outcome != runs.OutcomeScored || got != 3*time.Second {
		t.Fatalf("outcome %s, interval %s; want scored, the task's 3s", r.Outcome, got)
	}
}

// TestLabelledStartWritesNoLabels: a run started with its labels
// (RunSearchAttributes) writes them no more; one started without them, or
// with others, writes them in its first workflow task, as it always did.
func TestLabelledStartWritesNoLabels(t *testing.T) {
	in := RunInput{Task: "mini_baby_lm", Agent: "noop", Benchmark: "b1"}
	other := in
	other.Agent = "reference"
	for _, c := range []struct {
		name  string
		start *RunInput
		want  int
	}{
		{"started with its labels", &in, 0},
		{"started without", nil, 1},
		{"started with another run's", &other, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := newTestEnv()
			if c.start != nil {
				if err := env.SetTypedSearchAttributesOnStart(RunSearchAttributes(*c.start)); err != nil {
					t.Fatal(err)
				}
			}
			upserts := 0
			env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(mock.Arguments) { upserts++ }).Return(nil)
			env.ExecuteWorkflow(func(ctx workflow.Context) error { return newRunState(in).setup(ctx) })
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if upserts != c.want {
				t.Fatalf("%d upserts of the run's labels, want %d", upserts, c.want)
			}
		})
	}
}
