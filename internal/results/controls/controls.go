// A task's controls: for each of its evaluators, a model it is known to score.

// Package controls keeps the model each evaluator of a task is known to
// score, with the task's anchors. A model that crashes or hangs its
// evaluator, having passed every check, and a broken evaluator look the
// same from one evaluation; the evaluation runs the same evaluator on its
// control to tell them apart (activities/evaluation).
package controls

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/keys"
	"github.com/mlrb/mlrb/tasks"
)

// Control is the model a task's evaluator is known to score, kept with
// the task's anchors: the final model of the run its baseline anchor
// was measured on (StoreAnchor keeps it), or a scored run the operator
// chose (`starter anchors control`). Never an agent's model that
// happened to be scored first: an agent could then shape the control
// that judges its own crashes (audit M3). Its restore is budgeted at
// its own size: only its model directory is restored (Bytes, at most
// MaxBytes). Mini tasks need none (their untrained reference model is
// the control).
type Control struct {
	RunID     string    `json:"run_id"`
	Seq       int       `json:"seq"`
	Attempt   int       `json:"attempt"`
	Evaluator string    `json:"evaluator"`
	Score     float64   `json:"score"`
	Recorded  time.Time `json:"recorded"`
	// ModelPath is the model directory in the checkpoint, Bytes its
	// size; Source says who chose it.
	ModelPath string `json:"model_path"`
	Bytes     int64  `json:"bytes"`
	Source    string `json:"source"`
}

// MaxBytes bounds a control model's directory: every evaluation's
// timeout holds the time to restore one this large (workflows'
// evalOptions), whatever the run's own size.
const MaxBytes = 32 << 30

// EvaluatorOf names an evaluator for its control: the digest of the
// image (or binary) that ran and the task's final command.
func EvaluatorOf(digest string, task *tasks.Spec) string {
	return digest + " " + strings.Join(task.Evaluation.Command, " ")
}

// Set makes runID's final model the control of its task's evaluator
// (the one that scored it), replacing any: the run must be of task,
// scored without a rule broken, its model directory at most MaxBytes.
// source says who chose it.
func Set(ctx context.Context, e *checkpoint.Engine, task *tasks.Spec, runID, source string) (*Control, error) {
	var r runs.Result
	if err := runresults.Get(ctx, e.Store, runID, &r); err != nil {
		return nil, err
	}
	final := r.FinalSeq()
	switch {
	case r.Task != task.ID:
		return nil, fmt.Errorf("run %s is of task %s, not %s", runID, r.Task, task.ID)
	case r.Outcome != runs.OutcomeScored || r.Score == nil:
		return nil, fmt.Errorf("run %s ended %s: a control is a model its evaluator scored", runID, r.Outcome)
	case len(r.Violations) > 0:
		return nil, fmt.Errorf("run %s broke the task's rules (%s)", runID, strings.Join(r.Violations, "; "))
	case r.ModelPath == "" || final == 0 || r.EvaluatorImage == "":
		return nil, fmt.Errorf("run %s's result names no model, final checkpoint or evaluator", runID)
	}
	m, err := e.Load(ctx, runID, final)
	if err != nil {
		return nil, err
	}
	sub := m.Only(r.ModelPath)
	switch {
	case sub == nil:
		return nil, fmt.Errorf("run %s's checkpoint #%d holds no %s", runID, final, r.ModelPath)
	case sub.Bytes > MaxBytes:
		return nil, fmt.Errorf("run %s's model is %.1f GiB, over the %d GiB a control may be", runID, float64(sub.Bytes)/(1<<30), MaxBytes>>30)
	}
	c := Control{RunID: runID, Seq: final, Attempt: m.Attempt, Evaluator: EvaluatorOf(r.EvaluatorImage, task), Score: *r.Score,
		Recorded: time.Now().UTC(), ModelPath: r.ModelPath, Bytes: sub.Bytes, Source: source}
	if err := Keep(ctx, e.Store, task.ID, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// Keep stores c as the control of taskID's evaluator c.Evaluator.
func Keep(ctx context.Context, s blob.Store, taskID string, c *Control) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := s.Put(ctx, keys.Control(taskID, c.Evaluator), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("keep the control of %s: %w", taskID, err)
	}
	return nil
}

// Get reads the control of task's evaluator (nil: none).
func Get(ctx context.Context, s blob.Store, taskID, evaluator string) (*Control, error) {
	return read(ctx, s, keys.Control(taskID, evaluator))
}

// Any is a control of another of taskID's evaluators than the ones
// skip rejects (nil: none), read in key order.
func Any(ctx context.Context, s blob.Store, taskID string, skip func(*Control) bool) (*Control, error) {
	objs, err := s.List(ctx, keys.Controls(taskID))
	if err != nil {
		return nil, fmt.Errorf("controls of %s: %w", taskID, err)
	}
	for _, o := range objs {
		if c, err := read(ctx, s, o.Key); err == nil && c != nil && !skip(c) {
			return c, nil
		}
	}
	return nil, nil
}

func read(ctx context.Context, s blob.Store, key string) (*Control, error) {
	var c Control
	err := blob.ReadJSON(ctx, s, key, 1<<16, &c)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	return &c, nil
}
