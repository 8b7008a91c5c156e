package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// evaluation is the final model's: its tries, each an EvalAttempt of the
// result, and what an operator's retry found.
type evaluation struct {
	r     *runState
	tries []runs.EvalAttempt
	// scored is the first retry's that succeeded; broke is why a retry
	// found that the model breaks the evaluator.
	scored *activities.EvalResult
	broke  string
}

// evaluate scores the final checkpoint. When the evaluation's retries run
// out, the run waits at the gate for a retry-evaluation update (an
// operator fixed the evaluator) up to the policy's wait limit, rather
// than fail a run whose agent work is done: the agent is never run
// again. why, if set, is what the result says of an outcome its name
// does not explain.
func (e *evaluation) evaluate(ctx workflow.Context, outcome runs.Outcome, why string) (*runs.Result, error) {
	r := e.r
	r.setPhase(ctx, runs.PhaseEvaluating)
	if r.env.foldsFinalMark() && r.curve.begin() {
		// Picked first, so that the final evaluation scores the final
		// checkpoint's mark too.
		r.curve.pick(ctx)
	}
	ev, err := e.run(ctx, "")
	if err == nil {
		return e.scoredOverTime(ctx, outcome, why, ev)
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == activities.ErrNoModel {
		return r.finish(ctx, runs.OutcomeAgentFailed, "no model to evaluate: "+errText(err), nil), nil
	}
	if broke := modelBrokeEvaluator(err); broke != "" {
		return r.finish(ctx, runs.OutcomeAgentFailed, broke, nil), nil
	}
	r.gate.open(ctx, runs.PhaseAwaitingEvalRetry)
	ok, err := r.gate.wait(ctx, func() bool { return e.scored != nil || e.broke != "" })
	if err != nil {
		return nil, err
	}
	if e.scored == nil && e.broke != "" {
		return r.finish(ctx, runs.OutcomeAgentFailed, e.broke, nil), nil
	}
	if !ok && e.scored == nil {
		return r.finish(ctx, runs.OutcomeEvaluationFailed, "evaluation failed and no retry came within the wait limit: "+e.tries[len(e.tries)-1].Error, nil), nil
	}
	return e.scoredOverTime(ctx, outcome, why, e.scored)
}

// scoredOverTime finishes a run whose final model is scored (ev), after
// its curve.
func (e *evaluation) scoredOverTime(ctx workflow.Context, outcome runs.Outcome, why string, ev *activities.EvalResult) (*runs.Result, error) {
	if e.r.env.version(ctx, versionCurve) == 1 {
		if err := e.r.curve.scoreOverTime(ctx, ev); err != nil {
			return nil, err
		}
	}
	return e.r.finish(ctx, outcome, why, ev), nil
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

// setRetryHandler registers the retry-evaluation update at the run's
// gate (from setup, with the other handlers): admitted only while the run
// waits for one, so before that it is refused as it was when the handler
// was registered later.
func (e *evaluation) setRetryHandler(ctx workflow.Context) error {
	return handleRetry(ctx, &e.r.gate, UpdateRetryEvaluation, runs.PhaseAwaitingEvalRetry,
		func(ctx workflow.Context, req RetryEvaluation) (runs.EvalAttempt, error) {
			e.r.setPhase(ctx, runs.PhaseEvaluating)
			ev, err := e.run(ctx, req.Image)
			if err != nil {
				e.broke = modelBrokeEvaluator(err)
				e.r.setPhase(ctx, runs.PhaseAwaitingEvalRetry)
			} else {
				e.scored = ev
			}
			return e.tries[len(e.tries)-1], nil
		})
}

// run evaluates the final checkpoint with the retry policy and records
// the try; image replaces the evaluator image when set.
func (e *evaluation) run(ctx workflow.Context, image string) (*activities.EvalResult, error) {
	r := e.r
	in := activities.EvalInput{RunID: r.st.RunID, Task: r.spec.Spec, Seed: r.in.Seed, Final: *r.last, Image: image, N: len(e.tries) + 1}
	in.AlsoMark = r.env.foldsFinalMark() && r.curve.foldable()
	args := callArgs{pol: r.pol, evalWork: evalWork(in), bytes: r.last.Bytes}
	started := workflow.Now(ctx)
	var err error
	if lease := r.slots.scoringLease(); lease != nil {
		in.Lease, args.hostQueue = lease, lease.HostQueue
	} else if r.env.version(ctx, versionEvalOnLease) == 1 {
		// The evaluator gets the task's GPUs from a host's pool, like an
		// agent: the slot bounds evaluations per host and names the
		// devices it may see.
		var lease *activities.Lease
		var done func()
		lease, done, err = r.slots.leaseSlot(ctx, runs.RoleEvaluation, len(e.tries)+1, args.evalWork)
		if err == nil {
			in.Lease = lease
			args.hostQueue = lease.HostQueue
			if r.slots.keepForScoring(*lease, workflow.Now(ctx)) {
				done = func() {} // the marks run on it
			}
		}
		defer done()
	}
	// The run's last use of its slot gives it back itself.
	in.Release = r.env.foldsFinalMark() && r.slots.scoring != nil && r.curve.finalOnly(in.AlsoMark)
	var ev *activities.EvalResult
	if err == nil {
		ev, err = evaluate.call(ctx, args, in)
	}
	if err == nil && ev.Released {
		r.slots.dropScoring(ctx)
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
	e.tries = append(e.tries, att)
	if err != nil {
		// No slot is held while the run waits for an operator.
		r.slots.releaseScoring(ctx)
		return nil, err
	}
	return ev, nil
}
