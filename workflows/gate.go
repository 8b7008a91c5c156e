// gate is the run's one operator gate.

package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/internal/run/runs"
)

// gate is the run's one operator gate: when the final evaluation or the
// curve's marks run out of tries, the run parks (its benchmark gets its
// slot) and waits, up to the policy's wait limit, for an operator's retry
// (retry-evaluation, retry-curve), admitting one at a time and only
// while it waits.
type gate struct {
	c *runCore
	// busy: a retry is under way.
	busy bool
	// parked: the run told its benchmark it waits; waitUntil is when the
	// wait ends.
	parked    bool
	waitUntil time.Time
}

// open makes the run wait at phase for a retry, until the wait limit,
// its benchmark told.
func (g *gate) open(ctx workflow.Context, phase runs.Phase) {
	g.c.setPhase(ctx, phase)
	g.waitUntil = workflow.Now(ctx).Add(g.c.pol.EvalWaitLimit)
	g.park(ctx)
}

// wait waits for done up to the wait limit, then for a retry under way to
// end; it tells whether done came in time.
func (g *gate) wait(ctx workflow.Context, done func() bool) (bool, error) {
	ok, err := workflow.AwaitWithTimeout(ctx, g.c.pol.EvalWaitLimit, done)
	if err != nil {
		return false, err
	}
	return ok, workflow.Await(ctx, func() bool { return !g.busy })
}

// handleRetry registers the operator's retry name at the gate: admitted
// only while the run waits at phase and no retry is under way; serve
// runs it.
func handleRetry[Res any](ctx workflow.Context, g *gate, name string, phase runs.Phase, serve func(workflow.Context, RetryEvaluation) (Res, error)) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, name,
		func(ctx workflow.Context, req RetryEvaluation) (Res, error) {
			g.busy = true
			defer func() { g.busy = false }()
			return serve(ctx, req)
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req RetryEvaluation) error {
			if g.c.st.Phase != phase || g.busy {
				return fmt.Errorf("run is %s, not %s", g.c.st.Phase, phase)
			}
			return nil
		}},
	)
}

// park tells the run's benchmark, once, that it waits for an operator
// (an evaluation or curve retry) or for its person: its slot goes to the
// next run, so one broken evaluator never idles a benchmark for the wait
// limit, and a person's absence holds no run back. A run
// whose benchmark is gone (terminated) loses nothing by the signal's
// failure.
func (g *gate) park(ctx workflow.Context) {
	parent := workflow.GetInfo(ctx).ParentWorkflowExecution
	if parent == nil || g.parked || g.c.env.version(ctx, versionParkAwaiting) == workflow.DefaultVersion {
		return
	}
	g.parked = true
	// To the benchmark's current execution (it may have continued as new).
	f := workflow.SignalExternalWorkflow(ctx, parent.ID, "", SignalRunParked, g.c.st.RunID)
	workflow.Go(ctx, func(ctx workflow.Context) {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("benchmark not told the run waits", "benchmark", parent.ID, "error", err)
		}
	})
}

// waiting is why the run waits for an operator (lastError, the failure
// of what it waits to retry) and the commands that help, while it does.
func (g *gate) waiting(lastError string) *Waiting {
	id := g.c.st.RunID
	w := &Waiting{Log: "starter logs " + id + " --evaluator", Until: g.waitUntil, Error: lastError}
	switch g.c.st.Phase {
	case runs.PhaseAwaitingEvalRetry:
		w.Retry = "starter retry-eval " + id + " [--image IMAGE]"
	case runs.PhaseAwaitingCurveRetry:
		w.Retry = "starter retry-eval " + id + " --curve [--image IMAGE]"
	default:
		return nil
	}
	return w
}
