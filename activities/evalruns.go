// EvalInput's derived facts: how many evaluator runs an evaluation makes, and how long each may take.

package activities

import "time"

// BothSplits: the final evaluation's first evaluator run scores the dev
// split too (the task's curve.dev_args), as its mark; a task with an
// output check runs them apart.
func (in EvalInput) BothSplits() bool {
	c := in.Task.Evaluation.Curve
	return in.AlsoMark && c != nil && len(c.DevArgs) > 0 && in.Task.Evaluation.Check == nil
}

// EvaluatorRuns is the most evaluator runs the evaluation makes: the
// model's and then the mark's or, when the model's failed, a control
// model's; with both splits in one run, that run comes first and the
// two follow only if it failed.
func (in EvalInput) EvaluatorRuns() int {
	if in.BothSplits() {
		return 3
	}
	return 2
}

// RunTimeout is how long one evaluator run may take: the evaluation's
// timeout, and as long again for the check stage after it when the task
// has one (runChecks).
func (in EvalInput) RunTimeout() time.Duration {
	t := in.Task.Evaluation.Timeout.D()
	if in.Task.Evaluation.Check != nil {
		t *= 2
	}
	return t
}
