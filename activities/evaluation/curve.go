// PickMarks and the curve's evaluations: which checkpoints score the run over time, and the final model's mark.

package evaluation

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/lmeval"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

// PickMarks picks, for each mark, the run's committed checkpoint nearest
// to it in agent time (the earlier on a tie; a later one only within the
// slack), from the store's own manifests: a superseded attempt's are not
// the run's.
func (a *Evaluations) PickMarks(ctx context.Context, in activities.MarksInput) ([]runs.Mark, error) {
	ms, err := a.Runs.Engine.List(ctx, in.RunID)
	if err != nil {
		return nil, fmt.Errorf("checkpoints of %s: %w", in.RunID, err)
	}
	var own []*checkpoint.Manifest
	for _, m := range ms {
		if m.SupersededBy == 0 && m.Seq <= in.Final.Seq {
			own = append(own, m)
		}
	}
	return nearest(own, in.Marks, in.SlackS), nil
}

// nearest is PickMarks' choice over own, in commit order
// (checkpoint.PickMark: the rule retention keeps to).
func nearest(own []*checkpoint.Manifest, marks []float64, slack float64) []runs.Mark {
	out := make([]runs.Mark, len(marks))
	for i, at := range marks {
		out[i] = runs.Mark{AtS: at}
		if m := checkpoint.PickMark(own, at, slack); m != nil {
			out[i].Seq, out[i].AgentS = m.Seq, m.AgentSeconds
		} else {
			out[i].NoModel = "no checkpoint yet"
		}
	}
	return out
}

// evaluateFinal runs the final evaluation: with the dev split in the same
// run when the curve says how (dev_args) and the final checkpoint is
// also a mark; if that run fails, the test split alone, as without it,
// so that the failure is judged as before (and the mark on its own).
func (a *Evaluations) evaluateFinal(ctx context.Context, in activities.EvalInput, ev *workspace.EvalDirs, image string, lv *host.Liveness) (runtime.TaskSpec, *lmeval.Results, string, []byte, error) {
	if !in.BothSplits() {
		return a.evaluate(ctx, in, ev, image, lv)
	}
	ev.DevResultsName = workspace.ResultsName()
	spec, r, name, body, err := a.evaluate(ctx, in, ev, image, lv)
	if err == nil || ctx.Err() != nil {
		return spec, r, name, body, err
	}
	a.Logger.Warn("the evaluator of both splits failed: the test split is run alone", zap.String("run", in.RunID), zap.Error(err))
	// Fresh names: nothing the failed run left is read.
	ev.DevResultsName, ev.ResultsName = "", workspace.ResultsName()
	return a.evaluate(ctx, in, ev, image, lv)
}

// afterFinal does what the run asked of a scored final evaluation: its
// mark's score too, and the slot given back when nothing failed.
func (a *Evaluations) afterFinal(ctx context.Context, in activities.EvalInput, ev *workspace.EvalDirs, image string, lv *host.Liveness, res *activities.EvalResult) {
	if in.AlsoMark {
		res.Mark = a.alsoMark(ctx, in, ev, image, lv)
	}
	if in.Release && in.Lease != nil && (res.Mark == nil || res.Mark.Error == "") {
		res.Released = a.Host.ReleaseOwn(in.Lease.Token)
	}
}

// alsoMark scores the final evaluation's model (ev's sealed copy) with
// the task's curve command, in an evaluation of its own beside ev: its
// log and results are kept under the mark's name, as a mark evaluated
// alone keeps them. A failure is only reported: the run then evaluates
// the mark alone, where the failure is judged (the evaluator's or the
// model's).
func (a *Evaluations) alsoMark(ctx context.Context, in activities.EvalInput, ev *workspace.EvalDirs, image string, lv *host.Liveness) *activities.MarkScore {
	mark := in
	mark.Mark, mark.AlsoMark, mark.Release, mark.N = true, false, false, 0
	mark.Final = activities.CheckpointRef{Seq: in.Final.Seq}
	name := evaluationName(mark, host.TryOf(ctx))
	if ev.DevResultsName != "" {
		score, err := a.devScore(ctx, in, ev, name)
		if err == nil {
			return &activities.MarkScore{Score: score}
		}
		a.Logger.Warn("the dev split's results of the run of both splits are unusable: the mark is run alone", zap.String("run", in.RunID), zap.Error(err))
	}
	dir := filepath.Join(filepath.Dir(ev.Dir), name)
	_ = os.RemoveAll(dir)
	task := "eval-" + workspace.RunKey(in.RunID) + "-" + name
	mev, err := a.layEvaluation(dir, task, mark)
	if err != nil {
		return &activities.MarkScore{Error: err.Error()}
	}
	defer a.removeEvaluation(mev)
	mev.Model = ev.Model
	_, r, file, body, err := a.evaluate(ctx, mark, mev, image, lv)
	var score float64
	if err == nil {
		score, _, err = lmeval.Score(r, in.Task.Metric)
	}
	if err == nil {
		_, err = a.keepResults(ctx, in.RunID, name, file, body)
	}
	if err != nil {
		a.Logger.Warn("the final checkpoint's mark is left to its own evaluation", zap.String("run", in.RunID), zap.Error(err))
		return &activities.MarkScore{Error: err.Error()}
	}
	a.Logger.Info("evaluated the final checkpoint's mark", zap.String("run", in.RunID), zap.Float64("score", score))
	return &activities.MarkScore{Score: score}
}

// devScore reads the dev split's results that the final evaluation's
// run of both splits wrote ({dev_results}) as the final checkpoint's
// mark, and keeps them under the mark's name (its log is the final
// evaluation's).
func (a *Evaluations) devScore(ctx context.Context, in activities.EvalInput, ev *workspace.EvalDirs, name string) (float64, error) {
	body, err := safefs.ReadFile(ev.Results, ev.DevResultsName, lmeval.MaxBytes)
	if err != nil {
		return 0, fmt.Errorf("the dev split's results %s: %w", ev.DevResultsName, err)
	}
	r, err := lmeval.Parse(body, ev.DevResultsName)
	if err != nil {
		return 0, err
	}
	score, _, err := lmeval.Score(r, in.Task.Metric)
	if err != nil {
		return 0, err
	}
	if _, err := a.keepResults(ctx, in.RunID, name, ev.DevResultsName, body); err != nil {
		return 0, err
	}
	a.Logger.Info("evaluated the final checkpoint's mark in the same run", zap.String("run", in.RunID), zap.Float64("score", score))
	return score, nil
}
