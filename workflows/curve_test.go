package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/tasks"
)

// TestScoreOverTime: after the final evaluation, the checkpoints the
// marks picked are evaluated once each on one curve lease, with the
// task's dev split: a checkpoint without a model is "no model yet", a
// mark whose evaluations ran out waits for retry-curve (the final score
// kept), and the curve is best so far.
func TestScoreOverTime(t *testing.T) {
	env := newEnv(t)
	pol := testPolicy
	pol.NoCurve = false
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
			// mini_baby_lm: 30 s, marks at 0.1, 0.2, 0.35, 0.5 and 0.75 of it.
			if !slices.Equal(in.Marks, []float64{3, 6, 10.5, 15, 22.5}) {
				return nil, temporal.NewNonRetryableApplicationError("marks "+fmtFloats(in.Marks), activities.ErrBadTask, nil)
			}
			return committed(env, in, &activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 10}, ck(1, 2), ck(2, 5), ck(3, 10))
		})
	env.OnActivity(activities.PickMarksName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MarksInput) ([]runs.Mark, error) {
			if in.Final.Seq != 3 || in.SlackS != 2 {
				return nil, temporal.NewNonRetryableApplicationError("pick input", activities.ErrBadTask, nil)
			}
			seqs := []int{1, 2, 3, 3, 3}
			out := make([]runs.Mark, len(in.Marks))
			for i, at := range in.Marks {
				out[i] = runs.Mark{AtS: at, Seq: seqs[i]}
			}
			return out, nil
		})
	evaluated := map[int]int{}
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EvalInput) (*activities.EvalResult, error) {
			if !in.Mark {
				return score(0.8), nil
			}
			evaluated[in.Final.Seq]++
			switch {
			case in.Final.Seq == 1:
				return nil, temporal.NewNonRetryableApplicationError("no model dir", activities.ErrNoModel, nil)
			case in.Final.Seq == 2 && in.Image != "evaluator:fixed":
				return nil, errors.New("evaluator crashed")
			case in.Final.Seq == 2:
				return score(0.6), nil
			}
			return score(0.7), nil
		})
	// Each slot is asked of the worker running the run first (a local
	// activity), where one is free.
	var roles []string
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		if l, ok := args[0].(activities.LeaseRequest); ok && info.ActivityType.Name == activities.AcquireLeaseName && l.AtOnce {
			roles = append(roles, l.Role)
		}
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == activities.AcquireLeaseName {
			roles = append(roles, "queued")
		}
	})
	var waiting Status
	var retried []runs.Mark
	var rejected error
	env.RegisterDelayedCallback(func() {
		v, _ := env.QueryWorkflow(QueryStatus)
		_ = v.Get(&waiting)
		env.UpdateWorkflow(UpdateRetryCurve, "fixed", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {},
			OnComplete: func(v any, _ error) { retried, _ = v.([]runs.Mark) },
		}, RetryEvaluation{Image: "evaluator:fixed"})
	}, time.Hour)
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: pol})
	r := result(t, env)
	if waiting.Phase != runs.PhaseAwaitingCurveRetry || rejected != nil || len(retried) != 5 {
		t.Fatalf("while waiting: %+v; retry-curve: %v %+v", waiting, rejected, retried)
	}
	if r.Outcome != runs.OutcomeScored || r.Score == nil || *r.Score != 0.8 {
		t.Fatalf("result %+v", r)
	}
	if evaluated[1] != 1 || evaluated[2] != 3+1 || evaluated[3] != 1 {
		t.Fatalf("evaluations per checkpoint: %v", evaluated)
	}
	// The agent's slot serves its final evaluation and the first round
	// of marks; the retry-curve's round leases its own.
	if !slices.Equal(roles, []string{"", runs.RoleCurve}) {
		t.Fatalf("leases: %q", roles)
	}
	c := r.Curve
	if len(c) != 5 || c[0].NoModel == "" || c[0].Score != nil || c[0].Best != nil {
		t.Fatalf("curve %+v", c)
	}
	want := []float64{0.6, 0.7, 0.7, 0.7}
	for i, m := range c[1:] {
		if m.Score == nil || *m.Score != want[i] || *m.Best != want[i] || m.Error != "" || m.Split != contract.SplitDev {
			t.Fatalf("mark %d: %+v", i+1, m)
		}
	}
	if len(r.AttemptLog) != 1 || r.AttemptLog[0].End != string(activities.StopExited) || r.AttemptLog[0].ToS != 10 || len(r.CheckpointLog) != 3 {
		t.Fatalf("timeline: %+v %+v", r.AttemptLog, r.CheckpointLog)
	}
}

// TestCurveWithoutRetryKeepsTheScore: marks whose evaluations never
// succeed leave the run scored, its curve saying why, after the wait.
func TestCurveWithoutRetryKeepsTheScore(t *testing.T) {
	env := newEnv(t)
	pol := testPolicy
	pol.NoCurve, pol.Curve = false, marksOf(t, "5s", "0.5")
	env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(agentDone(env,
		&activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 20}, ck(1, 5), ck(2, 20)))
	env.OnActivity(activities.PickMarksName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MarksInput) ([]runs.Mark, error) {
			if !slices.Equal(in.Marks, []float64{5, 15}) {
				return nil, temporal.NewNonRetryableApplicationError("marks "+fmtFloats(in.Marks), activities.ErrBadTask, nil)
			}
			return []runs.Mark{{AtS: 5, Seq: 1}, {AtS: 15, Seq: 2}}, nil
		})
	env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EvalInput) (*activities.EvalResult, error) {
			if in.Mark {
				return nil, errors.New("dev split missing")
			}
			return score(0.5), nil
		})
	env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: pol})
	r := result(t, env)
	if r.Outcome != runs.OutcomeScored || *r.Score != 0.5 || len(r.Curve) != 2 || r.Curve[0].Error == "" || r.Curve[0].Score != nil {
		t.Fatalf("result %+v", r)
	}
}

func marksOf(t *testing.T, ss ...string) []tasks.MarkTime {
	t.Helper()
	var out []tasks.MarkTime
	for _, s := range ss {
		m, err := tasks.ParseMark(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func fmtFloats(xs []float64) string { return fmt.Sprint(xs) }

// TestFinalEvaluationScoresItsMark: the marks are picked before the final
// evaluation, which scores the final checkpoint's dev-split mark too; when
// no other mark needs the slot the evaluation gives it back itself (no
// ReleaseLease), and a folded mark that failed is evaluated alone.
func TestFinalEvaluationScoresItsMark(t *testing.T) {
	for _, c := range []struct {
		name       string
		seqs       []int // the checkpoint each of the two marks picks
		markErr    string
		wantAlone  []int // marks evaluated alone, by checkpoint
		wantCurve  []float64
		release    bool
		wantFreeds int // ReleaseLease calls
	}{
		{name: "all on the final", seqs: []int{2, 2}, wantCurve: []float64{0.7, 0.7}, release: true},
		{name: "one earlier", seqs: []int{1, 2}, wantAlone: []int{1}, wantCurve: []float64{0.6, 0.7}, wantFreeds: 1},
		{name: "folded mark failed", seqs: []int{2, 2}, markErr: "dev split missing", wantAlone: []int{2}, wantCurve: []float64{0.65, 0.65}, release: true, wantFreeds: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			pol := testPolicy
			pol.NoCurve, pol.Curve = false, marksOf(t, "5s", "0.5")
			env.OnActivity(activities.RunAgentName, mock.Anything, mock.Anything).Return(agentDone(env,
				&activities.AgentResult{StoppedBy: activities.StopExited, AgentSeconds: 20}, ck(1, 5), ck(2, 20)))
			env.OnActivity(activities.PickMarksName, mock.Anything, mock.Anything).Return([]runs.Mark{{AtS: 5, Seq: c.seqs[0]}, {AtS: 15, Seq: c.seqs[1]}}, nil)
			var alone []int
			env.OnActivity(activities.EvaluateName, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.EvalInput) (*activities.EvalResult, error) {
					if in.Mark {
						alone = append(alone, in.Final.Seq)
						return score(map[int]float64{1: 0.6, 2: 0.65}[in.Final.Seq]), nil
					}
					if !in.AlsoMark || in.Release != c.release {
						return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("final evaluation %+v", in), activities.ErrBadTask, nil)
					}
					ev := score(0.8)
					ev.Mark = &activities.MarkScore{Score: 0.7, Error: c.markErr}
					ev.Released = c.markErr == ""
					return ev, nil
				})
			freed := 0
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				if info.ActivityType.Name == activities.ReleaseLeaseName {
					freed++
				}
			})
			env.ExecuteWorkflow(RunWorkflow, RunInput{Task: "mini_baby_lm", Agent: "reference", Policy: pol})
			r := result(t, env)
			if r.Outcome != runs.OutcomeScored || *r.Score != 0.8 || !slices.Equal(alone, c.wantAlone) || freed != c.wantFreeds {
				t.Fatalf("outcome %s, score %v, marks evaluated alone %v, releases %d", r.Outcome, *r.Score, alone, freed)
			}
			for i, m := range r.Curve {
				if m.Score == nil || *m.Score != c.wantCurve[i] || m.Tries != 1 || m.Split != contract.SplitDev {
					t.Fatalf("mark %d: %+v", i, m)
				}
			}
		})
	}
}
