package workflows

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/runs"
	"github.com/mlrb/mlrb/tasks"
)

// curveState is the run's score over time: its marks as picked and
// scored, the evaluator image the final model was scored with (the
// marks' too), and the retry-curve update's.
type curveState struct {
	marks  []runs.Mark
	picked bool
	image  string
	rounds int
	busy   bool
	// final is the final evaluation's: its checkpoint needs no other on
	// the test split.
	final *activities.EvalResult
}

// UpdateRetryCurve evaluates again the marks whose evaluations ran out
// (optionally with another evaluator image), while the run waits in
// awaiting_curve_retry.
const UpdateRetryCurve = "retry-curve"

// curveMarks are the run's marks in agent seconds: the policy's, else
// the task's; none when the policy turns the curve off.
func (r *runState) curveMarks() []float64 {
	if r.pol.NoCurve {
		return nil
	}
	marks := r.pol.Curve
	if c := r.spec.Spec.Evaluation.Curve; len(marks) == 0 && c != nil {
		marks = c.At
	}
	return tasks.MarkSeconds(marks, r.timeLimit())
}

// curveSplit is what the marks are scored on.
func (r *runState) curveSplit() string {
	if c := r.spec.Spec.Evaluation.Curve; c != nil && len(c.Command) > 0 {
		return runs.SplitDev
	}
	return runs.SplitTest
}

// scoreOverTime scores the checkpoints nearest the curve's marks after
// the final evaluation (final), the agent long gone. When a mark's
// evaluations run out, the run waits for retry-curve up to the
// evaluation wait limit, its final score kept either way.
func (r *runState) scoreOverTime(ctx workflow.Context, final *activities.EvalResult) error {
	marks := r.curveMarks()
	if len(marks) == 0 || r.last == nil {
		return nil
	}
	r.curve.marks = make([]runs.Mark, len(marks))
	for i, at := range marks {
		r.curve.marks[i] = runs.Mark{AtS: at, Split: r.curveSplit()}
	}
	r.curve.final = final
	r.setPhase(ctx, runs.PhaseScoringCurve)
	if r.scoreMarks(ctx) {
		return nil
	}
	r.releaseScoring(ctx)
	r.setPhase(ctx, runs.PhaseAwaitingCurveRetry)
	r.waitUntil = workflow.Now(ctx).Add(r.pol.EvalWaitLimit)
	r.park(ctx)
	if _, err := workflow.AwaitWithTimeout(ctx, r.pol.EvalWaitLimit, r.curveDone); err != nil {
		return err
	}
	return workflow.Await(ctx, func() bool { return !r.curve.busy })
}

func (r *runState) curveDone() bool {
	return !slices.ContainsFunc(r.curve.marks, func(m runs.Mark) bool { return !m.Done() })
}

// scoreMarks picks the marks' checkpoints (once) and evaluates those not
// yet scored, one evaluation per checkpoint, all on one leased slot; it
// tells whether every mark has its answer.
func (r *runState) scoreMarks(ctx workflow.Context) bool {
	c := &r.curve
	if !c.picked {
		at := make([]float64, len(c.marks))
		for i, m := range c.marks {
			at[i] = m.AtS
		}
		in := activities.MarksInput{RunID: r.st.RunID, Marks: at, Final: *r.last, SlackS: r.interval().Seconds()}
		var picked []runs.Mark
		var err error
		if r.lean {
			picked, err = pickMarks.callLocal(ctx, localQuick, in)
		} else {
			picked, err = pickMarks.call(ctx, callArgs{}, in)
		}
		if err != nil {
			for i := range c.marks {
				c.marks[i].Error = "pick the checkpoints: " + errText(err)
			}
			return false
		}
		c.marks, c.picked = picked, true
		// The final checkpoint is scored already, on the same split.
		for i := range c.marks {
			m := &c.marks[i]
			m.Split = r.curveSplit()
			if m.Seq == r.last.Seq && m.Split == runs.SplitTest && c.final != nil {
				s := c.final.Score
				m.Score, m.Tries = &s, 1
			}
		}
	}
	var seqs []int
	for _, m := range c.marks {
		if !m.Done() && !slices.Contains(seqs, m.Seq) {
			seqs = append(seqs, m.Seq)
		}
	}
	if len(seqs) > 0 {
		c.rounds++
		lease, done, err := r.scoringLease(), func() {}, error(nil)
		if lease == nil {
			lease, done, err = r.leaseSlot(ctx, runs.RoleCurve, c.rounds, time.Duration(len(seqs))*evalWork(r.spec.Spec.Evaluation.Timeout.D()))
		}
		if err != nil {
			r.markFailed(seqs, "no slot to evaluate on: "+errText(err))
		} else {
			for _, seq := range seqs {
				r.scoreMark(ctx, seq, lease)
			}
		}
		done()
	}
	runs.BestSoFar(c.marks)
	return r.curveDone()
}

// scoreMark evaluates checkpoint seq and gives its answer to the marks
// it stands for.
func (r *runState) scoreMark(ctx workflow.Context, seq int, lease *activities.Lease) {
	in := activities.EvalInput{RunID: r.st.RunID, Task: r.spec.Spec, Seed: r.in.Seed, Final: activities.CheckpointRef{Seq: seq}, Image: r.curve.image, Lease: lease, Mark: true}
	args := callArgs{pol: r.pol, timeout: r.spec.Spec.Evaluation.Timeout.D(), bytes: r.last.Bytes}
	if lease != nil {
		args.hostQueue = lease.HostQueue
	}
	ev, err := evaluate.call(ctx, args, in)
	var ae *temporal.ApplicationError
	noModel := err != nil && errors.As(err, &ae) && ae.Type() == activities.ErrNoModel
	broke := modelBrokeEvaluator(err)
	for i := range r.curve.marks {
		m := &r.curve.marks[i]
		if m.Seq != seq {
			continue
		}
		m.Tries++
		switch {
		case err == nil:
			s := ev.Score
			m.Score, m.Error = &s, ""
		case noModel:
			m.NoModel, m.Error = "no model yet: "+errText(err), ""
		case broke != "":
			// The agent's: no operator's retry would score it.
			m.NoModel, m.Error = broke, ""
		default:
			m.Error = errText(err)
		}
	}
}

func (r *runState) markFailed(seqs []int, why string) {
	for i := range r.curve.marks {
		if slices.Contains(seqs, r.curve.marks[i].Seq) {
			r.curve.marks[i].Error = why
		}
	}
}

// leaseSlot leases a slot for role's nth use (provisioning its host
// first); done gives back what was obtained and counts the host's time.
func (r *runState) leaseSlot(ctx workflow.Context, role string, n int, work time.Duration) (*activities.Lease, func(), error) {
	req := activities.LeaseRequest{RunID: r.st.RunID, Attempt: n, Role: role,
		GPUCount: r.spec.Spec.Resources.GPUCount, GPUType: r.spec.Spec.Resources.GPUType}
	r.st.LeasingSince = workflow.Now(ctx)
	defer func() { r.st.LeasingSince = time.Time{} }()
	queue, err := r.provision(ctx, role, n, work)
	if err != nil {
		return nil, func() {}, err
	}
	lease, err := acquireLease.call(ctx, callArgs{pol: r.pol, hostQueue: queue}, req)
	leased := workflow.Now(ctx)
	return lease, func() {
		if err == nil {
			r.release(ctx, *lease)
		}
		r.held(ctx, leased)
		r.releaseHost(ctx)
	}, err
}

// setRetryCurveHandler registers the retry-curve update: admitted only
// while the run waits for one.
func (r *runState) setRetryCurveHandler(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateRetryCurve,
		func(ctx workflow.Context, req RetryEvaluation) ([]runs.Mark, error) {
			r.curve.busy = true
			defer func() { r.curve.busy = false }()
			if req.Image != "" {
				r.curve.image = req.Image
			}
			r.setPhase(ctx, runs.PhaseScoringCurve)
			if !r.scoreMarks(ctx) {
				r.setPhase(ctx, runs.PhaseAwaitingCurveRetry)
			}
			return slices.Clone(r.curve.marks), nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req RetryEvaluation) error {
			if r.st.Phase != runs.PhaseAwaitingCurveRetry || r.curve.busy {
				return fmt.Errorf("run is %s, not %s", r.st.Phase, runs.PhaseAwaitingCurveRetry)
			}
			return nil
		}},
	)
}
