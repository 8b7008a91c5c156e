// Control evaluations: a failed evaluation tells a broken evaluator from a model that breaks it.

package evaluation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/internal/results/anchors"
	"github.com/mlrb/mlrb/internal/results/controls"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/lmeval"
	"github.com/mlrb/mlrb/internal/scoring/model"
	"github.com/mlrb/mlrb/internal/scoring/reference"
	"github.com/mlrb/mlrb/internal/store/safefs"
	"github.com/mlrb/mlrb/tasks"
)

// A model that crashes or hangs its evaluator, having passed every check,
// and an evaluator that is broken look the same from one evaluation. So
// when the evaluator fails on a run's model, the same activity runs the
// same evaluator, in the same place, on a control model it is known to
// score: if the control scores, the run's model broke the evaluator (the
// agent's failure, ErrModelBrokeEvaluator); if not, or if there is no
// control, the failure stays the evaluator's, and the run waits for an
// operator (retry-eval) with the way to give it one. The error is retried like
// any evaluation's, so the agent is blamed only when every try agrees.

// evaluatorID names an evaluator for its control: the digest of the image
// that ran (the task's, a retry's, or the deployment's default) and the
// task's final command.
func evaluatorID(digest string, in activities.EvalInput) string {
	return controls.EvaluatorOf(digest, &in.Task)
}

// candidateControl is the task's own model for an evaluator that has no
// control yet, chosen once already and never by an agent: the model of
// the task's baseline anchor measured here, else the control of another
// of its evaluators (a retry's image). The evaluator scores it where a
// model first failed it, and it is kept as that evaluator's control if
// it scores (control). Nil: the task has none.
func (a *Evaluations) candidateControl(ctx context.Context, in activities.EvalInput) *controls.Control {
	if an, err := anchors.Get(ctx, a.Runs.Engine.Store, in.Task.ID, anchors.Baseline); err == nil && an != nil && an.RunID != "" && an.RunID != in.RunID {
		var r runs.Result
		if runresults.Get(ctx, a.Runs.Engine.Store, an.RunID, &r) == nil && r.Task == in.Task.ID && r.ModelPath != "" && r.FinalSeq() > 0 && len(r.Violations) == 0 {
			return &controls.Control{RunID: an.RunID, Seq: r.FinalSeq(), ModelPath: r.ModelPath, Source: "the baseline anchor"}
		}
	}
	c, err := controls.Any(ctx, a.Runs.Engine.Store, in.Task.ID, func(c *controls.Control) bool { return c.RunID == in.RunID })
	if err != nil || c == nil {
		return nil
	}
	return &controls.Control{RunID: c.RunID, Seq: c.Seq, ModelPath: c.ModelPath, Source: c.Source + ", another evaluator's control"}
}

// keepControl keeps a candidate the evaluator has just scored as its
// control.
func (a *Evaluations) keepControl(ctx context.Context, in activities.EvalInput, c *controls.Control, evaluator string, score float64) {
	c.Evaluator, c.Score, c.Recorded = evaluator, score, time.Now().UTC()
	if err := controls.Keep(ctx, a.Runs.Engine.Store, in.Task.ID, c); err != nil {
		a.Logger.Warn("keep the control", zap.String("task", in.Task.ID), zap.Error(err))
	}
}

// blame tells who broke an evaluation that failed (failure): the run's
// model, if the evaluator scores a control model; else the evaluator.
func (a *Evaluations) blame(ctx context.Context, in activities.EvalInput, image, evaluator string, lv *host.Liveness, failure error) error {
	var ef *evaluatorFailed
	if !errors.As(failure, &ef) || ctx.Err() != nil || a.NoControl {
		return failure
	}
	source, score, err := a.control(ctx, in, image, evaluator, lv)
	if err != nil {
		a.Logger.Warn("control evaluation", zap.String("run", in.RunID), zap.Error(err))
		return fmt.Errorf("%w (a control evaluation, which tells a broken evaluator from a model that breaks it, did not score: %v)", failure, err)
	}
	what := "crashed"
	if ef.hung {
		what = "hung"
	}
	msg := fmt.Sprintf("the model %s the evaluator: %v; the same evaluator then scored %s %.4g in the same place", what, failure, source, score)
	a.Logger.Info("model broke its evaluator", zap.String("run", in.RunID), zap.String("why", msg))
	return temporal.NewApplicationErrorWithCause(msg, activities.ErrModelBrokeEvaluator, failure)
}

// control evaluates the control model as in's model was evaluated and
// says which model it was and its score.
func (a *Evaluations) control(ctx context.Context, in activities.EvalInput, image, evaluator string, lv *host.Liveness) (string, float64, error) {
	name := evaluationName(in, host.TryOf(ctx)) + "-control"
	dir := filepath.Join(a.Host.WorkDir, "eval", workspace.RunKey(in.RunID), name)
	_ = os.RemoveAll(dir)
	defer func() { _ = os.RemoveAll(dir) }()
	source, candidate, shipped, err := a.controlModel(ctx, in, evaluator, dir, lv)
	if err != nil {
		return "", 0, err
	}
	task := "eval-" + workspace.RunKey(in.RunID) + "-" + name
	ev, err := a.layEvaluation(dir, task, in)
	if err != nil {
		return "", 0, err
	}
	ev.ShippedModel = shipped
	_, r, _, _, err := a.evaluate(ctx, in, ev, image, lv)
	if err != nil {
		return "", 0, err
	}
	score, _, err := lmeval.Score(r, in.Task.Metric)
	if err == nil && candidate != nil {
		a.keepControl(ctx, in, candidate, evaluator, score)
	}
	return source, score, err
}

// shippedName names a control shipped with its evaluator.
func shippedName(c *tasks.ControlModel) string {
	if c.Revision == "" {
		return fmt.Sprintf("%s (at %s in the evaluator)", c.Model, c.Path)
	}
	return fmt.Sprintf("%s@%s (at %s in the evaluator)", c.Model, c.Revision[:min(12, len(c.Revision))], c.Path)
}

// controlModel lays the control model out as dir/model and says what it
// is: a mini task's untrained reference model; else the task's own
// control, shipped in its evaluator (returned as shipped, its path there:
// nothing is laid out); else the task's control for this evaluator; else
// a candidate (candidateControl, returned to be kept once it scores), its
// model directory alone restored (never the run's own model, never its
// whole workspace).
func (a *Evaluations) controlModel(ctx context.Context, in activities.EvalInput, evaluator, dir string, lv *host.Liveness) (source string, candidate *controls.Control, shipped string, err error) {
	if in.Task.Reference != nil {
		if err := reference.Untrained(&in.Task, filepath.Join(dir, "model")); err != nil {
			return "", nil, "", fmt.Errorf("the untrained reference model: %w", err)
		}
		return "the task's untrained reference model", nil, "", nil
	}
	if c := in.Task.Evaluation.Control; c != nil {
		return "the task's control " + shippedName(c), nil, c.Path, nil
	}
	c, err := controls.Get(ctx, a.Runs.Engine.Store, in.Task.ID, evaluator)
	switch {
	case err != nil:
		return "", nil, "", err
	case c == nil:
		if candidate = a.candidateControl(ctx, in); candidate == nil {
			return "", nil, "", fmt.Errorf("%s has no control model for this evaluator: measure its baseline anchor (`starter anchors measure %s --role baseline --agent …`) or choose a scored run (`starter anchors control %s --run RUN_ID`), then `starter retry-eval %s`",
				in.Task.ID, in.Task.ID, in.Task.ID, in.RunID)
		}
		c = candidate
	case c.RunID == in.RunID:
		return "", nil, "", errors.New("the control is this run's own model")
	}
	bytes, err := a.restoreControl(ctx, c, dir, lv)
	if err != nil {
		return "", nil, "", err
	}
	c.Bytes = bytes
	if candidate != nil {
		return fmt.Sprintf("run %s's model (checkpoint #%d, %s, scored by this evaluator for the first time)", c.RunID, c.Seq, c.Source), candidate, "", nil
	}
	return fmt.Sprintf("run %s's model (checkpoint #%d, scored %.4g, the control chosen by %s on %s)", c.RunID, c.Seq, c.Score, c.Source, c.Recorded.Format("2006-01-02")), nil, "", nil
}

// restoreControl restores the control's model directory alone under
// dir/workspace and seals it as dir/model; it returns its bytes.
func (a *Evaluations) restoreControl(ctx context.Context, c *controls.Control, dir string, lv *host.Liveness) (int64, error) {
	m, err := a.Runs.Engine.Load(ctx, c.RunID, c.Seq)
	if err != nil {
		return 0, fmt.Errorf("control: run %s's checkpoint #%d: %w", c.RunID, c.Seq, err)
	}
	sub := m.Only(c.ModelPath)
	if sub == nil || sub.Bytes > controls.MaxBytes {
		return 0, fmt.Errorf("control: run %s's checkpoint #%d holds no model at %s of at most %d GiB", c.RunID, c.Seq, c.ModelPath, controls.MaxBytes>>30)
	}
	root := filepath.Join(dir, "workspace")
	lv.Step(host.StepRestoring, sub.Bytes)
	if err := a.Runs.Engine.Restore(lv.Counting(ctx), sub, root); err != nil {
		return 0, fmt.Errorf("control: restore run %s's model: %w", c.RunID, err)
	}
	modelDir := filepath.Join(root, filepath.FromSlash(c.ModelPath))
	if err := safefs.CheckLinks(root, modelDir); err != nil {
		return 0, fmt.Errorf("control: %w", err)
	}
	if err := model.Seal(modelDir, filepath.Join(dir, "model")); err != nil {
		return 0, fmt.Errorf("control: %w", err)
	}
	return sub.Bytes, nil
}
