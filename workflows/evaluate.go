package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/runs"
)

// evaluate scores the final checkpoint. When the evaluation's retries run
// out, the run waits for a retry-evaluation update (an operator fixed the
// evaluator) up to the policy's wait limit, rather than fail a run whose
// agent work is done: the agent is never run again. why, if set, is what
// the result says of an outcome its name does not explain.
func (r *runState) evaluate(ctx workflow.Context, outcome runs.Outcome, why string) (*runs.Result, error) {
	r.setPhase(ctx, runs.PhaseEvaluating)
	ev, err := r.runEvaluation(ctx, "")
	if err == nil {
		return r.scoredOverTime(ctx, outcome, why, ev)
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == activities.ErrNoModel {
		return r.finish(ctx, runs.OutcomeAgentFailed, "no model to evaluate: "+errText(err), nil), nil
	}
	if broke := modelBrokeEvaluator(err); broke != "" {
		return r.finish(ctx, runs.OutcomeAgentFailed, broke, nil), nil
	}
	r.setPhase(ctx, runs.PhaseAwaitingEvalRetry)
	r.waitUntil = workflow.Now(ctx).Add(r.pol.EvalWaitLimit)
	r.park(ctx)
	ok, err := workflow.AwaitWithTimeout(ctx, r.pol.EvalWaitLimit, func() bool { return r.retry.scored != nil || r.retry.broke != "" })
	if err != nil {
		return nil, err
	}
	if err := workflow.Await(ctx, func() bool { return !r.retry.busy }); err != nil {
		return nil, err
	}
	if r.retry.scored == nil && r.retry.broke != "" {
		return r.finish(ctx, runs.OutcomeAgentFailed, r.retry.broke, nil), nil
	}
	if !ok && r.retry.scored == nil {
		return r.finish(ctx, runs.OutcomeEvaluationFailed, "evaluation failed and no retry came within the wait limit: "+r.evals[len(r.evals)-1].Error, nil), nil
	}
	return r.scoredOverTime(ctx, outcome, why, r.retry.scored)
}

// park tells the run's benchmark, once, that it waits for an operator
// (an evaluation or curve retry): its slot goes to the next run, so one
// broken evaluator never idles a benchmark for the wait limit. A run
// whose benchmark is gone (terminated) loses nothing by the signal's
// failure.
func (r *runState) park(ctx workflow.Context) {
	parent := workflow.GetInfo(ctx).ParentWorkflowExecution
	if parent == nil || r.parked || r.version(ctx, versionParkAwaiting) == workflow.DefaultVersion {
		return
	}
	r.parked = true
	// To the benchmark's current execution (it may have continued as new).
	f := workflow.SignalExternalWorkflow(ctx, parent.ID, "", SignalRunParked, r.st.RunID)
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("benchmark not told the run waits", "benchmark", parent.ID, "error", err)
		}
	})
}

// scoredOverTime finishes a run whose final model is scored (ev), after
// its curve.
func (r *runState) scoredOverTime(ctx workflow.Context, outcome runs.Outcome, why string, ev *activities.EvalResult) (*runs.Result, error) {
	if r.version(ctx, versionCurve) == 1 {
		if err := r.curve.scoreOverTime(ctx, ev); err != nil {
			return nil, err
		}
	}
	return r.finish(ctx, outcome, why, ev), nil
}

// retryState is the retry-evaluation update's: one evaluation retried at
// a time, and the score of the first that succeeds.
type retryState struct {
	busy   bool
	scored *activities.EvalResult
	// broke is why a retry found that the model breaks the evaluator.
	broke string
}

// modelBrokeEvaluator is why the run's model is to blame for err: the
// evaluator crashed or hung on it, then scored a control model ("" when
// err is no such failure).
func modelBrokeEvaluator(err error) string {
	var ae *temporal.ApplicationError
	if err == nil || !errors.As(err, &ae) || ae.Type() != activities.ErrModelBrokeEvaluator {
		return ""
	}
	return ae.Message()
}

// setRetryHandler registers the retry-evaluation update (from setup, with
// the other handlers): its validator admits it only while the run waits
// for one, so before that it is refused as it was when the handler was
// registered later.
func (r *runState) setRetryHandler(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateRetryEvaluation,
		func(ctx workflow.Context, req RetryEvaluation) (runs.EvalAttempt, error) {
			r.retry.busy = true
			defer func() { r.retry.busy = false }()
			r.setPhase(ctx, runs.PhaseEvaluating)
			ev, err := r.runEvaluation(ctx, req.Image)
			if err != nil {
				r.retry.broke = modelBrokeEvaluator(err)
				r.setPhase(ctx, runs.PhaseAwaitingEvalRetry)
			} else {
				r.retry.scored = ev
			}
			return r.evals[len(r.evals)-1], nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req RetryEvaluation) error {
			if r.st.Phase != runs.PhaseAwaitingEvalRetry || r.retry.busy {
				return fmt.Errorf("run is %s, not %s", r.st.Phase, runs.PhaseAwaitingEvalRetry)
			}
			return nil
		}},
	)
}

// runEvaluation evaluates the final checkpoint with the retry policy and
// records the attempt; image replaces the evaluator image when set.
func (r *runState) runEvaluation(ctx workflow.Context, image string) (*activities.EvalResult, error) {
	in := activities.EvalInput{RunID: r.st.RunID, Task: r.spec.Spec, Seed: r.in.Seed, Final: *r.last, Image: image, N: len(r.evals) + 1}
	args := callArgs{pol: r.pol, timeout: r.spec.Spec.Evaluation.Timeout.D(), bytes: r.last.Bytes}
	started := workflow.Now(ctx)
	var err error
	if lease := r.slots.scoringLease(); lease != nil {
		in.Lease, args.hostQueue = lease, lease.HostQueue
	} else if r.version(ctx, versionEvalOnLease) == 1 {
		// The evaluator gets the task's GPUs from a host's pool, like an
		// agent: the slot bounds evaluations per host and names the
		// devices it may see.
		var lease *activities.Lease
		var done func()
		lease, done, err = r.slots.leaseSlot(ctx, runs.RoleEvaluation, len(r.evals)+1, evalWork(r.spec.Spec.Evaluation.Timeout.D()))
		if err == nil {
			in.Lease = lease
			args.hostQueue = lease.HostQueue
			if r.slots.keepForScoring(*lease, workflow.Now(ctx)) {
				done = func() {} // the marks run on it
			}
		}
		defer done()
	}
	var ev *activities.EvalResult
	if err == nil {
		ev, err = evaluate.call(ctx, args, in)
	}
	att := runs.EvalAttempt{Started: started, Image: image, At: workflow.Now(ctx)}
	if err != nil {
		att.Error = errText(err)
	} else {
		score := ev.Score
		att.Score = &score
		if ev.Image != "" {
			att.Image = ev.Image
		}
		r.curve.image = image // the marks are scored as the final model was
	}
	r.evals = append(r.evals, att)
	if err != nil {
		// No slot is held while the run waits for an operator.
		r.slots.releaseScoring(ctx)
		return nil, err
	}
	return ev, nil
}

// waiting is why the run waits for an operator and the commands that
// help, while it does.
func (r *runState) waiting() *Waiting {
	id := r.st.RunID
	w := &Waiting{Log: "starter logs " + id + " --evaluator", Until: r.waitUntil}
	switch r.st.Phase {
	case runs.PhaseAwaitingEvalRetry:
		if len(r.evals) > 0 {
			w.Error = r.evals[len(r.evals)-1].Error
		}
		w.Retry = "starter retry-eval " + id + " [--image IMAGE]"
	case runs.PhaseAwaitingCurveRetry:
		for _, m := range r.curve.marks {
			if m.Error != "" {
				w.Error = m.Error
			}
		}
		w.Retry = "starter retry-eval " + id + " --curve [--image IMAGE]"
	default:
		return nil
	}
	return w
}
