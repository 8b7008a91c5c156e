// Evaluate restores the final checkpoint into a fresh directory (never the agent's), finds the model, checks the task's constraints, runs the evaluator.

package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/lmeval"
	"github.com/mlrb/mlrb/internal/scoring/model"
	"github.com/mlrb/mlrb/internal/store/keys"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

// Evaluate restores the final checkpoint into a fresh directory (never the
// agent's), finds the model, checks the task's constraints, runs the
// evaluator in the workspace (a process, or a fresh container) and reads
// its lm-eval results.
func (a *Evaluations) Evaluate(ctx context.Context, in activities.EvalInput) (res *activities.EvalResult, err error) {
	defer func(start time.Time) { a.Metrics.Evaluation(in.Task.ID, time.Since(start), err) }(time.Now())
	ctx, lv, err := a.live(ctx, in.Lease)
	if err != nil {
		return nil, err
	}
	defer lv.Close()
	ev, root, err := a.prepareEvaluation(ctx, in, lv)
	if err != nil {
		return nil, err
	}
	// The evaluation's files go with it; the checkpoint stays in the store.
	defer a.removeEvaluation(ev)
	check, err := model.CheckConstraints(ev.Model, &in.Task)
	if err != nil {
		// The model cannot be loaded safely: the agent's failure, and
		// no evaluator ever runs it.
		return nil, temporal.NewNonRetryableApplicationError("model refused: "+err.Error(), activities.ErrNoModel, err)
	}
	image := in.Task.Evaluation.Image
	if in.Image != "" {
		image = in.Image
	}
	spec, r, name, body, err := a.evaluateFinal(ctx, in, ev, image, lv)
	digest := evaluatorName(ctx, a.Sandbox, spec, in.Task.Evaluation.Command)
	var score float64
	var metrics map[string]float64
	if err == nil {
		score, metrics, err = lmeval.Score(r, in.Task.Metric)
		if err != nil {
			err = &evaluatorFailed{err: err}
		}
	}
	if err != nil {
		return nil, a.blame(ctx, in, image, evaluatorID(digest, in), lv, err)
	}
	if m := r.Measured; m != nil {
		check.UseMeasuredPeak(in.Task.Constraints, *m)
	}
	for k, v := range check.Metrics {
		metrics[k] = v
	}
	kept, err := a.keepResults(ctx, in.RunID, filepath.Base(ev.Dir), name, body)
	if err != nil {
		return nil, err
	}
	a.Logger.Info("evaluated", zap.String("run", in.RunID), zap.Float64("score", score), zap.Strings("violations", check.Violations))
	rel, _ := filepath.Rel(root.dir, root.model)
	res = &activities.EvalResult{Score: score, Metrics: metrics, ModelPath: filepath.ToSlash(rel), Params: check.Params, Violations: check.Violations, Flags: check.Flags, Provenance: withData(r.Provenance, ev.Data), ResultsFile: kept,
		Image: digest, Usage: readUsage(root)}
	res.ImageCopies, res.ImageNotCompared = a.imageCopies(ctx, in, ev.Model)
	a.afterFinal(ctx, in, ev, image, lv, res)
	return res, nil
}

// evaluate runs the evaluator over ev (and each output's check, if the
// task has one, in a stage of the same timeout after it) and reads the results
// it wrote, with the checks' rate written in; it returns them as parsed
// and as stored, and the evaluator's task.
func (a *Evaluations) evaluate(ctx context.Context, in activities.EvalInput, ev *workspace.EvalDirs, image string, lv *host.Liveness) (runtime.TaskSpec, *lmeval.Results, string, []byte, error) {
	command := in.Task.Evaluation.Command
	if c := in.Task.Evaluation.Curve; c != nil {
		switch {
		case in.Mark && len(c.Command) > 0:
			command = c.Command
		case ev.DevResultsName != "":
			command = append(slices.Clone(command), c.DevArgs...)
		}
	}
	spec := a.Sandbox.Workspace.EvalTask(ev, command, image)
	a.Sandbox.Bound(&spec, &in.Task)
	spec.Labels = map[string]string{runtime.LabelRun: in.RunID, runtime.LabelRole: "evaluator"}
	if in.Lease != nil {
		spec.Devices = in.Lease.Devices
	}
	lv.Step(host.StepEvaluating, 0)
	timeout := in.Task.Evaluation.Timeout.D()
	log := a.Logger.With(zap.String("run", in.RunID), zap.String("role", "evaluator"))
	err := a.runEvaluator(ctx, spec, ev.Door, timeout, log)
	if kept := a.keepLog(ctx, in.RunID, ev, spec.LogPath); err != nil && kept {
		err = fmt.Errorf("%w (its log is kept: `starter logs %s --evaluator`)", err, in.RunID)
	}
	if err != nil {
		return spec, nil, "", nil, err
	}
	lv.Step(host.StepReadResults, 0)
	name, body, err := readResults(ev, command)
	if err != nil {
		return spec, nil, "", nil, &evaluatorFailed{err: err}
	}
	r, err := lmeval.Parse(body, name)
	if err != nil {
		return spec, nil, "", nil, &evaluatorFailed{err: err}
	}
	c := in.Task.Evaluation.Check
	if c == nil {
		return spec, r, name, body, nil
	}
	lv.Step(host.StepChecking, 0)
	rate, sem, err := a.runChecks(ctx, ev, &in.Task, image, timeout)
	if err != nil {
		return spec, nil, "", nil, err
	}
	setRate(r, c, rate, sem)
	if body, err = json.MarshalIndent(r, "", "  "); err != nil {
		return spec, nil, "", nil, fmt.Errorf("results with the checks: %w", err)
	}
	return spec, r, name, body, nil
}

// snapshot is a restored checkpoint: its root, the agent's work dir and
// the model dir found in it.
type snapshot struct{ dir, workdir, model string }

// prepareEvaluation restores the final checkpoint into a directory of
// its own and lays out the evaluation around the model found in it.
func (a *Evaluations) prepareEvaluation(ctx context.Context, in activities.EvalInput, lv *host.Liveness) (*workspace.EvalDirs, snapshot, error) {
	lv.Step(host.StepPreparing, 0)
	name := evaluationName(in, host.TryOf(ctx))
	dir := filepath.Join(a.Host.WorkDir, "eval", workspace.RunKey(in.RunID), name)
	_ = os.RemoveAll(dir)
	root, err := a.restoreModel(ctx, in.RunID, in.Final, dir, lv)
	if err != nil {
		return nil, root, err
	}
	task := "eval-" + workspace.RunKey(in.RunID) + "-" + name
	ev, err := a.layEvaluation(dir, task, in)
	return ev, root, err
}

// evaluationName names an evaluation's directory, results key, task and
// door: a mark's are its own, so the final one's may be kept beside it.
func evaluationName(in activities.EvalInput, try int32) string {
	switch {
	case in.Mark:
		return fmt.Sprintf("mark-%d-try-%d", in.Final.Seq, try)
	case in.N > 0:
		return fmt.Sprintf("final-%d-try-%d", in.N, try)
	}
	return fmt.Sprintf("try-%d", try)
}

// restoreModel restores what an evaluation reads of checkpoint ref of
// runID under dir/workspace (model.Restore) and seals the model dir
// found in it as dir/model. A checkpoint without a
// model the evaluator may load is ErrNoModel.
func (a *Evaluations) restoreModel(ctx context.Context, runID string, ref activities.CheckpointRef, dir string, lv *host.Liveness) (snapshot, error) {
	root := snapshot{dir: filepath.Join(dir, "workspace")}
	m, err := a.Runs.Engine.Load(ctx, runID, ref.Seq)
	if err == nil && ref.Attempt != 0 && m.Attempt != ref.Attempt {
		err = fmt.Errorf("#%d is attempt %d's, the run accepted attempt %d's", m.Seq, m.Attempt, ref.Attempt)
	}
	if err != nil {
		return root, fmt.Errorf("checkpoint #%d: %w", ref.Seq, err)
	}
	if m.Truncated {
		// What the agent left past the bound is not in it: never scored,
		// whichever activity reads it (the final model, a mark, a control).
		why := fmt.Errorf("checkpoint #%d is incomplete: %s", m.Seq, host.IncompleteWhy(m))
		return root, temporal.NewNonRetryableApplicationError(why.Error(), activities.ErrNoModel, why)
	}
	// Only what the evaluation reads: the agent's reports, then its
	// model's directory when they name one (else the whole workspace).
	if _, err := model.Restore(lv.Counting(ctx), a.Runs.Engine, m, root.dir, func(n int64) { lv.Step(host.StepRestoring, n) }); err != nil {
		_ = os.RemoveAll(dir)
		return root, fmt.Errorf("restore checkpoint #%d: %w", m.Seq, err)
	}
	lv.Step(host.StepFindModel, 0)
	root.workdir = filepath.Join(root.dir, filepath.FromSlash(m.Workdir))
	modelDir, err := model.FindModel(root.dir, root.workdir)
	if err == nil {
		// The evaluator reads the model dir: no link in it may lead out,
		// and it gets a sealed copy, the files the check reads.
		if err = safefs.CheckLinks(root.dir, modelDir); err == nil {
			root.model = modelDir
			err = model.Seal(root.model, filepath.Join(dir, "model"))
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return root, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrNoModel, err)
	}
	return root, nil
}

// layEvaluation lays out the evaluation in dir around dir/model: its
// results and outputs dirs, the task spec it reads, and the task's data
// sets as this host holds them, each checked against its spec's hash.
func (a *Evaluations) layEvaluation(dir, task string, in activities.EvalInput) (*workspace.EvalDirs, error) {
	checked, err := a.Data.Check(&in.Task)
	if err != nil {
		return nil, fmt.Errorf("evaluation data: %w", err)
	}
	data := make([]workspace.DataSet, len(checked))
	for i, d := range checked {
		data[i] = workspace.DataSet{Name: d.Name, Path: d.Path, SHA256: d.SHA256}
	}
	ev := &workspace.EvalDirs{Name: task, Dir: dir, Model: filepath.Join(dir, "model"), Results: filepath.Join(dir, "results"),
		Outputs: filepath.Join(dir, "outputs"), ResultsName: workspace.ResultsName(), Spec: filepath.Join(dir, "task.json"), Task: in.Task.ID, Seed: in.Seed,
		Door: a.Host.DoorDir(task), Network: in.Task.Evaluation.Network, Data: data}
	for _, d := range []string{ev.Results, ev.Outputs, filepath.Join(dir, "run")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("eval dir: %w", err)
		}
	}
	if err := host.WriteJSONFile(ev.Spec, in.Task); err != nil {
		return nil, fmt.Errorf("task spec: %w", err)
	}
	return ev, nil
}

// runEvaluator runs the evaluator to its end, its timeout, or the
// activity's cancellation; anything but a clean exit is an error.
func (a *Evaluations) runEvaluator(ctx context.Context, spec runtime.TaskSpec, doorDir string, timeout time.Duration, log *zap.Logger) error {
	res, timedOut, err := a.Sandbox.RunToEnd(ctx, spec, doorDir, timeout, log)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return fmt.Errorf("start evaluator %q: %w", spec.Command, err)
	case timedOut:
		return &evaluatorFailed{err: fmt.Errorf("evaluator ran past its %s timeout", timeout), hung: true}
	case !res.Successful():
		return &evaluatorFailed{err: fmt.Errorf("evaluator %s: %s", res, tail(spec.LogPath))}
	}
	return nil
}

// evaluatorFailed is an evaluator that ran and failed on its model: it
// exited with an error, ran past its timeout (hung), or left no results
// the metric can be read from. A model can cause that; an evaluator that
// never started, or a store that failed, it cannot.
type evaluatorFailed struct {
	err  error
	hung bool
}

func (e *evaluatorFailed) Error() string { return e.err.Error() }
func (e *evaluatorFailed) Unwrap() error { return e.err }

// EvaluatorLogKeep is how much of an evaluator's log (its end) is kept
// in the store.
const EvaluatorLogKeep = 1 << 20

// EvaluatorLogKey is where an evaluation's log is kept: beside its
// results, under the evaluation's directory name (final-N-try-M: the
// final model's Nth evaluation, a retry-eval's among them; mark-S-try-M).
func EvaluatorLogKey(runID, evaluation string) string {
	return keys.Evaluation(runID, evaluation, activities.EvaluatorLogName)
}

// keepLog stores the end of an evaluator's log, whether it succeeded or
// not: the evaluation's directory goes when it ends, and an operator
// deciding on retry-eval needs the log. It tells whether it was kept.
func (a *Evaluations) keepLog(ctx context.Context, runID string, ev *workspace.EvalDirs, logPath string) bool {
	f, err := os.Open(logPath)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	if st, err := f.Stat(); err == nil && st.Size() > EvaluatorLogKeep {
		_, _ = f.Seek(st.Size()-EvaluatorLogKeep, io.SeekStart)
	}
	if err := a.Runs.Engine.Store.Put(ctx, EvaluatorLogKey(runID, filepath.Base(ev.Dir)), io.LimitReader(f, EvaluatorLogKeep)); err != nil {
		a.Logger.Warn("keep the evaluator's log", zap.String("run", runID), zap.Error(err))
		return false
	}
	return true
}

// removeEvaluation removes an evaluation's files, and the run's
// evaluation directory when nothing else is in it.
func (a *Evaluations) removeEvaluation(ev *workspace.EvalDirs) {
	if err := os.RemoveAll(ev.Dir); err != nil {
		a.Logger.Warn("remove the evaluation's files", zap.String("dir", ev.Dir), zap.Error(err))
	}
	_ = os.Remove(filepath.Dir(ev.Dir)) // only if empty
}

// tail is the end of a log, for an error: only its last bytes are read.
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	const keep = 400
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(0, st.Size()-keep-64)
	b := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(b, off)
	s := strings.TrimSpace(string(b[:n]))
	if len(s) > keep || off > 0 {
		s = "…" + s[max(0, len(s)-keep):]
	}
	return s
}
