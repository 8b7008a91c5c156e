package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/blob"
	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/lmeval"
	"github.com/mlrb/mlrb/internal/reference"
)

// A model that crashes or hangs its evaluator, having passed every check,
// and an evaluator that is broken look the same from one evaluation. So
// when the evaluator fails on a run's model, the same activity runs the
// same evaluator, in the same place, on a control model it is known to
// score: if the control scores, the run's model broke the evaluator (the
// agent's failure, ErrModelBrokeEvaluator); if not, or if there is no
// control, the failure stays the evaluator's. The error is retried like
// any evaluation's, so the agent is blamed only when every try agrees.

// Control is a model an evaluator scored: the first final model of the
// task scored by that evaluator without a rule broken. Mini tasks need
// none (their untrained reference model is the control).
type Control struct {
	RunID     string    `json:"run_id"`
	Seq       int       `json:"seq"`
	Attempt   int       `json:"attempt"`
	Evaluator string    `json:"evaluator"`
	Score     float64   `json:"score"`
	Recorded  time.Time `json:"recorded"`
}

// ControlKey is where a task's control for an evaluator (its image digest
// and final command) is kept.
func ControlKey(taskID, evaluator string) string {
	sum := sha256.Sum256([]byte(evaluator))
	return "controls/" + taskID + "/" + hex.EncodeToString(sum[:8]) + ".json"
}

// evaluatorID names an evaluator for its control: the digest of the image
// that ran (the task's, a retry's, or the deployment's default) and the
// task's final command.
func evaluatorID(digest string, in EvalInput) string {
	return digest + " " + strings.Join(in.Task.Evaluation.Command, " ")
}

// recordControl keeps the run's final model as the control of its task's
// evaluator, unless one is kept already (the first stays: a later model
// never replaces a control that still restores).
func (a *Evaluations) recordControl(ctx context.Context, in EvalInput, id string, score float64) {
	if in.Task.Reference != nil {
		return
	}
	b, err := json.Marshal(Control{RunID: in.RunID, Seq: in.Final.Seq, Attempt: in.Final.Attempt, Evaluator: id, Score: score, Recorded: time.Now().UTC()})
	if err == nil {
		err = a.Engine.Store.Create(ctx, ControlKey(in.Task.ID, id), bytes.NewReader(b))
	}
	if err != nil && !errors.Is(err, blob.ErrExists) {
		a.Logger.Warn("keep the control model", zap.String("run", in.RunID), zap.Error(err))
	}
}

// blame tells who broke an evaluation that failed (failure): the run's
// model, if the evaluator scores a control model; else the evaluator.
func (a *Evaluations) blame(ctx context.Context, in EvalInput, image, evaluator string, lv *liveness, failure error) error {
	var ef *evaluatorFailed
	if !errors.As(failure, &ef) || ctx.Err() != nil {
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
	return temporal.NewApplicationErrorWithCause(msg, ErrModelBrokeEvaluator, failure)
}

// control evaluates the control model as in's model was evaluated and
// says which model it was and its score.
func (a *Evaluations) control(ctx context.Context, in EvalInput, image, evaluator string, lv *liveness) (string, float64, error) {
	name := evaluationName(in, tryOf(ctx)) + "-control"
	dir := filepath.Join(a.WorkDir, "eval", runKey(in.RunID), name)
	_ = os.RemoveAll(dir)
	defer func() { _ = os.RemoveAll(dir) }()
	source, err := a.controlModel(ctx, in, evaluator, dir, lv)
	if err != nil {
		return "", 0, err
	}
	task := "eval-" + runKey(in.RunID) + "-" + name
	ev, err := layEvaluation(dir, task, a.doorDir(task), in)
	if err != nil {
		return "", 0, err
	}
	_, r, _, _, err := a.evaluate(ctx, in, ev, image, lv)
	if err != nil {
		return "", 0, err
	}
	score, _, err := lmeval.Score(r, in.Task.Metric)
	return source, score, err
}

// controlModel lays the control model out as dir/model and says what it
// is: a mini task's untrained reference model, else the task's kept
// control for this evaluator (never the run's own model).
func (a *Evaluations) controlModel(ctx context.Context, in EvalInput, evaluator, dir string, lv *liveness) (string, error) {
	if in.Task.Reference != nil {
		if err := reference.Untrained(&in.Task, filepath.Join(dir, "model")); err != nil {
			return "", fmt.Errorf("the untrained reference model: %w", err)
		}
		return "the task's untrained reference model", nil
	}
	key := ControlKey(in.Task.ID, evaluator)
	rc, err := a.Engine.Store.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return "", fmt.Errorf("no control model yet: this evaluator has scored no model of %s", in.Task.ID)
	}
	if err != nil {
		return "", fmt.Errorf("control %s: %w", key, err)
	}
	b, err := io.ReadAll(io.LimitReader(rc, 1<<16))
	_ = rc.Close()
	var c Control
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return "", fmt.Errorf("control %s: %w", key, err)
	}
	if c.RunID == in.RunID {
		return "", errors.New("the control is this run's own model")
	}
	if _, err := a.restoreModel(ctx, c.RunID, CheckpointRef{Seq: c.Seq, Attempt: c.Attempt}, dir, lv); err != nil {
		// Gone (its run or its chunks deleted): the next scored model takes
		// its place.
		var gone *checkpoint.CorruptChunkError
		if errors.Is(err, blob.ErrNotFound) || errors.As(err, &gone) {
			_ = a.Engine.Store.Delete(ctx, key)
		}
		return "", fmt.Errorf("control: run %s's checkpoint #%d: %w", c.RunID, c.Seq, err)
	}
	return fmt.Sprintf("run %s's model (checkpoint #%d, scored %.4g on %s)", c.RunID, c.Seq, c.Score, c.Recorded.Format("2006-01-02")), nil
}
