package workflows

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/runs"
)

func TestEvaluationRetried(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(agentDone(env, &activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 3,
	}, ck(1, 3)))
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
	if r.Outcome != runs.OutcomeScored || tries != 3 {
		t.Fatalf("result = %+v after %d tries", r, tries)
	}
}

func TestEvaluationFailureIsNotZero(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(agentDone(env, &activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 3,
	}, ck(1, 3)))
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(nil, errors.New("evaluator image is broken"))
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	// No retry-evaluation came within the wait limit.
	if r.Outcome != runs.OutcomeEvaluationFailed || r.Score != nil || r.EvalTries != 1 || r.Evaluations[0].Error == "" {
		t.Fatalf("result = %+v", r)
	}
}

// TestRetryEvaluationInPlace: the evaluator fails until retried with a
// fixed image through the update; the agent never runs again.
func TestRetryEvaluationInPlace(t *testing.T) {
	env := newEnv(t)
	agentRuns := 0
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			agentRuns++
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3))
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
	var got runs.EvalAttempt
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
				if a, ok := v.(runs.EvalAttempt); ok {
					got = a
				}
			},
		}, RetryEvaluation{Image: "evaluator:fixed"})
	}, 2*time.Hour)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if mid.Phase != runs.PhaseAwaitingEvalRetry {
		t.Fatalf("phase while waiting = %q", mid.Phase)
	}
	if first != nil || second != nil {
		t.Fatalf("updates rejected: %v, %v", first, second)
	}
	if r.Outcome != runs.OutcomeScored || r.Score == nil || *r.Score != 0.77 || agentRuns != 1 {
		t.Fatalf("result %+v after %d agent runs", r, agentRuns)
	}
	if len(r.Evaluations) != 3 || r.Evaluations[2].Image != "sha256:fixed" || got.Score == nil {
		t.Fatalf("evaluations = %+v, update result %+v", r.Evaluations, got)
	}
}

// TestEvaluationHoldsALease: the evaluation runs on a host's queue under a
// slot of its pool for the task's GPUs: on a static host, the slot the
// agent's attempt held (a lean run's evaluations share it, with no lease
// and release between them), released once, when the run ends.
func TestEvaluationHoldsALease(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		agentDone(env, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 3}, ck(1, 3)))
	var got activities.EvalInput
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EvalInput) (*activities.EvalResult, error) {
			got = in
			return score(0.5), nil
		})
	var released []string
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		var l activities.Lease
		if info.ActivityType.Name == activities.ReleaseLeaseName && args.Get(&l) == nil {
			released = append(released, l.Token)
		}
	})
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != runs.OutcomeScored || got.Lease == nil || got.Lease.HostQueue != "mlrb-host-h" || !slices.Equal(got.Lease.Devices, []int{3}) {
		t.Fatalf("outcome %s, evaluation lease %+v", r.Outcome, got.Lease)
	}
	if strings.HasSuffix(got.Lease.Token, "#"+runs.RoleEvaluation) || len(released) != 1 || released[0] != got.Lease.Token {
		t.Fatalf("evaluation lease %q; released %q", got.Lease.Token, released)
	}
}

// TestRuleBreakerIsDisqualified: a model that breaks its task's rules
// ends the run disqualified, with each rule and measured value in the
// reason; its score is kept as a metric and never as the run's score.
func TestRuleBreakerIsDisqualified(t *testing.T) {
	env := newEnv(t)
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(agentDone(env, &activities.AgentResult{
		StoppedBy: activities.StopExited, AgentSeconds: 3,
	}, ck(1, 3)))
	ev := score(0.9)
	ev.Violations = []string{"9000000000 parameters exceed the limit of 8600000000"}
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(ev, nil)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Seed: 1, Policy: testPolicy})
	r := result(t, env)
	if r.Outcome != runs.OutcomeDisqualified || r.Score != nil || r.Metrics["disqualified/score"] != 0.9 || r.Metrics["m"] != 0.9 {
		t.Fatalf("result = %+v", r)
	}
	if !strings.Contains(r.Reason, "exceed the limit of 8600000000") || len(r.Violations) != 1 {
		t.Fatalf("reason %q, violations %v", r.Reason, r.Violations)
	}
}
