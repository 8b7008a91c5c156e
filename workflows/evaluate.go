// The final model's evaluation, its retries and retry-eval.

package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// evalPhase is the final model's evaluation: its tries, each an
// EvalAttempt of the result, and what an operator's retry found.
type evalPhase struct {
	c     *runCore
	slots *slots
	gate  *gate
	curve *curveState
	tries []runs.EvalAttempt
	// scored is the first retry's that succeeded; broke is why a retry
	// found that the model breaks the evaluator.
	scored *activities.EvalResult
	broke  string
	// image is the evaluator image the scoring try ran ("": the task's).
	image string
}

// evaluate scores the final checkpoint and says how the run ends (as
// outcome, why, when its model is scored). When the evaluation's retries
// run out, the run waits at the gate for a retry-evaluation update (an
// operator fixed the evaluator) up to the policy's wait limit, rather
// than fail a run whose agent work is done: the agent is never run
// again. why, if set, is what the result says of an outcome its name
// does not explain.
func (e *evalPhase) evaluate(ctx workflow.Context, outcome runs.Outcome, why string) (verdict, error) {
	e.c.setPhase(ctx, runs.PhaseEvaluating)
	if e.c.env.foldsFinalMark() && e.curve.begin() {
		// Picked first, so that the final evaluation scores the final
		// checkpoint's mark too.
		e.curve.pick(ctx)
	}
	ev, err := e.run(ctx, "")
	if err == nil {
		return verdict{outcome, why, ev}, nil
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == activities.ErrNoModel {
		return verdict{outcome: runs.OutcomeAgentFailed, reason: "no model to evaluate: " + errText(err)}, nil
	}
	if broke := modelBrokeEvaluator(err); broke != "" {
		return verdict{outcome: runs.OutcomeAgentFailed, reason: broke}, nil
	}
	e.gate.open(ctx, runs.PhaseAwaitingEvalRetry)
	ok, err := e.gate.wait(ctx, func() bool { return e.scored != nil || e.broke != "" })
	if err != nil {
		return verdict{}, err
	}
	if e.scored == nil && e.broke != "" {
		return verdict{outcome: runs.OutcomeAgentFailed, reason: e.broke}, nil
	}
	if !ok && e.scored == nil {
		return verdict{outcome: runs.OutcomeEvaluationFailed, reason: "evaluation failed and no retry came within the wait limit: " + e.lastError()}, nil
	}
	return verdict{outcome, why, e.scored}, nil
}

// lastError is why the last try failed ("" if it did not).
func (e *evalPhase) lastError() string {
	if len(e.tries) == 0 {
		return ""
	}
	return e.tries[len(e.tries)-1].Error
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
func (e *evalPhase) setRetryHandler(ctx workflow.Context) error {
	return handleRetry(ctx, e.gate, UpdateRetryEvaluation, runs.PhaseAwaitingEvalRetry,
		func(ctx workflow.Context, req RetryEvaluation) (runs.EvalAttempt, error) {
			e.c.setPhase(ctx, runs.PhaseEvaluating)
			ev, err := e.run(ctx, req.Image)
			if err != nil {
				e.broke = modelBrokeEvaluator(err)
				e.c.setPhase(ctx, runs.PhaseAwaitingEvalRetry)
			} else {
				e.scored = ev
			}
			return e.tries[len(e.tries)-1], nil
		})
}

// run evaluates the final checkpoint with the retry policy and records
// the try; image replaces the evaluator image when set.
func (e *evalPhase) run(ctx workflow.Context, image string) (*activities.EvalResult, error) {
	in := activities.EvalInput{RunID: e.c.st.RunID, Task: e.c.spec.Spec, Seed: e.c.in.Seed, Final: *e.c.last, Image: image, N: len(e.tries) + 1, AgentImage: e.c.image()}
	in.AlsoMark = e.c.env.foldsFinalMark() && e.curve.foldable()
	args := callArgs{pol: e.c.pol, evalWork: evalWork(in), bytes: e.c.last.Bytes}
	started := workflow.Now(ctx)
	var err error
	if lease := e.slots.scoringLease(); lease != nil {
		in.Lease, args.hostQueue = lease, lease.HostQueue
	} else if e.c.env.version(ctx, versionEvalOnLease) == 1 {
		// The evaluator gets the task's GPUs from a host's pool, like an
		// agent: the slot bounds evaluations per host and names the
		// devices it may see.
		var lease *activities.Lease
		var done func()
		lease, done, err = e.slots.leaseSlot(ctx, runs.RoleEvaluation, len(e.tries)+1, args.evalWork)
		if err == nil {
			in.Lease = lease
			args.hostQueue = lease.HostQueue
			if e.slots.keepForScoring(*lease, workflow.Now(ctx)) {
				done = func() {} // the marks run on it
			}
		}
		defer done()
	}
	// The run's last use of its slot gives it back itself.
	in.Release = e.c.env.foldsFinalMark() && e.slots.scoring != nil && e.curve.finalOnly(in.AlsoMark)
	var ev *activities.EvalResult
	if err == nil {
		ev, err = evaluate.call(ctx, args, in)
	}
	if err == nil && ev.Released {
		e.slots.dropScoring(ctx)
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
		e.image = image
	}
	e.tries = append(e.tries, att)
	if err != nil {
		// No slot is held while the run waits for an operator.
		e.slots.releaseScoring(ctx)
		return nil, err
	}
	return ev, nil
}

// result: the final evaluation's tries.
func (e *evalPhase) result(res *runs.Result) {
	res.Evaluations, res.EvalTries = e.tries, len(e.tries)
}
