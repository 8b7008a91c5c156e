// curveState is the run's score over time.

package workflows

import (
	"errors"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/tasks"
)

// curveState is the run's score over time: its marks as picked and
// scored, the evaluator image the final model was scored with (the
// marks' too), and the retry-curve update's.
type curveState struct {
	c      *runCore
	slots  *slots
	gate   *gate
	marks  []runs.Mark
	picked bool
	image  string
	rounds int
	// final is the final evaluation's: its checkpoint needs no other on
	// the test split.
	final *activities.EvalResult
}

// UpdateRetryCurve evaluates again the marks whose evaluations ran out
// (optionally with another evaluator image), while the run waits in
// awaiting_curve_retry.
const UpdateRetryCurve = "retry-curve"

// setRetryHandler registers the retry-curve update at the run's gate:
// admitted only while the run waits for one.
func (cv *curveState) setRetryHandler(ctx workflow.Context) error {
	return handleRetry(ctx, cv.gate, UpdateRetryCurve, runs.PhaseAwaitingCurveRetry,
		func(ctx workflow.Context, req RetryEvaluation) ([]runs.Mark, error) {
			if req.Image != "" {
				cv.image = req.Image
			}
			cv.c.setPhase(ctx, runs.PhaseScoringCurve)
			if !cv.scoreMarks(ctx) {
				cv.c.setPhase(ctx, runs.PhaseAwaitingCurveRetry)
			}
			return slices.Clone(cv.marks), nil
		})
}

// curveMarks are the run's marks in agent seconds: the policy's, else
// the task's; none when the policy turns the curve off.
func (cv *curveState) curveMarks() []float64 {
	if cv.c.pol.NoCurve {
		return nil
	}
	marks := cv.c.pol.Curve
	if c := cv.c.spec.Spec.Evaluation.Curve; len(marks) == 0 && c != nil {
		marks = c.At
	}
	return tasks.MarkSeconds(marks, cv.c.timeLimit())
}

// curveSplit is what the marks are scored on.
func (cv *curveState) curveSplit() string {
	if c := cv.c.spec.Spec.Evaluation.Curve; c != nil && len(c.Command) > 0 {
		return contract.SplitDev
	}
	return contract.SplitTest
}

// begin lays the curve's marks out, once; false when the run has none.
func (cv *curveState) begin() bool {
	if cv.marks != nil {
		return true
	}
	marks := cv.curveMarks()
	if len(marks) == 0 || cv.c.last == nil {
		return false
	}
	cv.marks = make([]runs.Mark, len(marks))
	for i, at := range marks {
		cv.marks[i] = runs.Mark{AtS: at, Split: cv.curveSplit()}
	}
	return true
}

// scoreOverTime scores the checkpoints nearest the curve's marks after
// the final evaluation (final), the agent long gone. When a mark's
// evaluations run out, the run waits for retry-curve up to the
// evaluation wait limit, its final score kept either way.
func (cv *curveState) scoreOverTime(ctx workflow.Context, final *activities.EvalResult, image string) error {
	if !cv.begin() {
		return nil
	}
	cv.final, cv.image = final, image
	if cv.c.env.foldsFinalMark() && cv.picked {
		// The final evaluation may have scored every mark: then the run
		// never enters the curve's phase.
		cv.takeFinal()
		if cv.curveDone() {
			runs.BestSoFar(cv.marks)
			return nil
		}
	}
	cv.c.setPhase(ctx, runs.PhaseScoringCurve)
	if cv.scoreMarks(ctx) {
		return nil
	}
	cv.slots.releaseScoring(ctx)
	cv.gate.open(ctx, runs.PhaseAwaitingCurveRetry)
	_, err := cv.gate.wait(ctx, cv.curveDone)
	return err
}

func (cv *curveState) curveDone() bool {
	return !slices.ContainsFunc(cv.marks, func(m runs.Mark) bool { return !m.Done() })
}

// pick picks the marks' checkpoints; on a failure each mark says why,
// and the next round picks again.
func (cv *curveState) pick(ctx workflow.Context) bool {
	at := make([]float64, len(cv.marks))
	for i, m := range cv.marks {
		at[i] = m.AtS
	}
	in := activities.MarksInput{RunID: cv.c.st.RunID, Marks: at, Final: *cv.c.last, SlackS: cv.c.interval().Seconds()}
	picked, err := pickMarks.run(ctx, cv.c.env, callArgs{}, in)
	if err != nil {
		for i := range cv.marks {
			cv.marks[i].Error = "pick the checkpoints: " + errText(err)
		}
		return false
	}
	cv.marks, cv.picked = picked, true
	for i := range cv.marks {
		cv.marks[i].Split = cv.curveSplit()
	}
	return true
}

// takeFinal gives the final evaluation's scores to the marks the final
// checkpoint stands for: its own on the test split, the curve command's
// it ran too (EvalInput.AlsoMark) on the dev split.
func (cv *curveState) takeFinal() {
	f := cv.final
	if f == nil {
		return
	}
	for i := range cv.marks {
		m := &cv.marks[i]
		if m.Seq != cv.c.last.Seq || m.Done() {
			continue
		}
		switch {
		case m.Split == contract.SplitTest:
			s := f.Score
			m.Score, m.Tries = &s, 1
		case f.Mark != nil && f.Mark.Error == "":
			s := f.Mark.Score
			m.Score, m.Tries = &s, 1
		}
	}
}

// foldable tells whether the final evaluation should score the final
// checkpoint's mark too: the marks are picked, one stands for the final
// checkpoint and is scored on the dev split.
func (cv *curveState) foldable() bool {
	return cv.picked && cv.curveSplit() == contract.SplitDev && slices.ContainsFunc(cv.marks, func(m runs.Mark) bool {
		return m.Seq == cv.c.last.Seq && !m.Done()
	})
}

// finalOnly tells whether the final evaluation (scoring the final
// checkpoint's mark too when alsoMark) leaves the curve nothing to
// evaluate: then the run needs its slot no more.
func (cv *curveState) finalOnly(alsoMark bool) bool {
	if len(cv.curveMarks()) == 0 {
		return true
	}
	if !cv.picked {
		return false
	}
	return !slices.ContainsFunc(cv.marks, func(m runs.Mark) bool {
		return !m.Done() && (m.Seq != cv.c.last.Seq || m.Split != contract.SplitTest && !alsoMark)
	})
}

// scoreMarks picks the marks' checkpoints (once) and evaluates those not
// yet scored, one evaluation per checkpoint, all on one leased slot; it
// tells whether every mark has its answer.
func (cv *curveState) scoreMarks(ctx workflow.Context) bool {
	c := cv
	if !c.picked && !c.pick(ctx) {
		return false
	}
	c.takeFinal()
	var seqs []int
	for _, m := range c.marks {
		if !m.Done() && !slices.Contains(seqs, m.Seq) {
			seqs = append(seqs, m.Seq)
		}
	}
	if len(seqs) > 0 {
		c.rounds++
		lease, done, err := cv.slots.scoringLease(), func() {}, error(nil)
		if lease == nil {
			// A mark's evaluation runs its evaluator and, if that fails, a control's.
			lease, done, err = cv.slots.leaseSlot(ctx, runs.RoleCurve, c.rounds, time.Duration(len(seqs))*evalWork(activities.EvalInput{Task: cv.c.spec.Spec, Mark: true}))
		}
		if err != nil {
			cv.markFailed(seqs, "no slot to evaluate on: "+errText(err))
		} else {
			for _, seq := range seqs {
				cv.scoreMark(ctx, seq, lease)
			}
		}
		done()
	}
	runs.BestSoFar(c.marks)
	return cv.curveDone()
}

// scoreMark evaluates checkpoint seq and gives its answer to the marks
// it stands for.
func (cv *curveState) scoreMark(ctx workflow.Context, seq int, lease *activities.Lease) {
	in := activities.EvalInput{RunID: cv.c.st.RunID, Task: cv.c.spec.Spec, Seed: cv.c.in.Seed, Final: activities.CheckpointRef{Seq: seq}, Image: cv.image, Lease: lease, Mark: true}
	args := callArgs{pol: cv.c.pol, evalWork: evalWork(in), bytes: cv.c.last.Bytes}
	if lease != nil {
		args.hostQueue = lease.HostQueue
	}
	ev, err := evaluate.call(ctx, args, in)
	var ae *temporal.ApplicationError
	noModel := err != nil && errors.As(err, &ae) && ae.Type() == activities.ErrNoModel
	broke := modelBrokeEvaluator(err)
	for i := range cv.marks {
		m := &cv.marks[i]
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

func (cv *curveState) markFailed(seqs []int, why string) {
	for i := range cv.marks {
		if slices.Contains(seqs, cv.marks[i].Seq) {
			cv.marks[i].Error = why
		}
	}
}

// lastError is why a mark's last evaluation failed ("" if none did).
func (cv *curveState) lastError() string {
	why := ""
	for _, m := range cv.marks {
		if m.Error != "" {
			why = m.Error
		}
	}
	return why
}

// result: the curve's marks.
func (cv *curveState) result(res *runs.Result) { res.Curve = cv.marks }
