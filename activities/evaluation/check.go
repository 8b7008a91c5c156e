// The check stage of an evaluation: each output the evaluator left checked in a task of its own.

package evaluation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/lmeval"
	"github.com/mlrb/mlrb/internal/store/safefs"
	"github.com/mlrb/mlrb/tasks"
)

// Bounds of a check stage: outputs an evaluator may leave, and the size of
// one (a Lean proof is kilobytes). An output past the size fails its
// check; more outputs than the bound fail the evaluation.
const (
	maxCheckItems     = 100_000
	maxCheckItemBytes = 4 << 20
)

// runChecks checks every output the evaluator left in ev.outputs, each in
// a task of its own (Workspace.CheckTask: no network, the output its only
// mount), and returns the share that passed (exit status 0) with its
// standard error. An output is copied, through descriptors, into a
// directory of the worker's before it is mounted: the evaluator's tree is
// data, never a path Docker resolves. The stage has a budget of its own
// (stage, after the evaluator's): an output still unchecked when it
// passes fails its check, as one that runs out its own timeout does; a
// model whose outputs make every check overrun scores its own failures,
// never an evaluation failure (audit M1).
func (a *Evaluations) runChecks(ctx context.Context, ev *workspace.EvalDirs, task *tasks.Spec, image string, stage time.Duration) (float64, float64, error) {
	c := task.Evaluation.Check
	if c.Image != "" {
		image = c.Image
	}
	d, err := safefs.OpenDir(ev.Outputs)
	if err != nil {
		return 0, 0, fmt.Errorf("outputs to check: %w", err)
	}
	defer func() { _ = d.Close() }()
	names, err := d.Names()
	if err != nil {
		return 0, 0, fmt.Errorf("outputs to check: %w", err)
	}
	if len(names) == 0 {
		return 0, 0, errors.New("the evaluator left no outputs to check in {outputs}")
	}
	if len(names) > maxCheckItems {
		return 0, 0, fmt.Errorf("the evaluator left %d outputs to check, more than %d", len(names), maxCheckItems)
	}
	st := &checkStage{a: a, ctx: ctx, d: d, ev: ev, task: task, image: image}
	g, gctx := errgroup.WithContext(ctx)
	var cancel context.CancelFunc
	st.sctx, cancel = context.WithTimeout(gctx, stage)
	defer cancel()
	limit := c.Parallel
	if limit <= 0 {
		limit = 4
	}
	g.SetLimit(limit)
	for i, name := range names {
		g.Go(func() error { return st.item(i, name) })
	}
	if err := g.Wait(); err != nil {
		return 0, 0, fmt.Errorf("checks: %w", err)
	}
	if n := st.unfinished.Load(); n > 0 {
		a.Logger.Info("outputs unchecked when the check stage's budget passed: they fail", zap.Int64("unchecked", n), zap.Int("outputs", len(names)), zap.Duration("budget", stage))
	}
	n := float64(len(names))
	p := float64(st.passed.Load()) / n
	sem := 0.0
	if n > 1 {
		sem = math.Sqrt(p * (1 - p) / (n - 1)) // the sample std of 0/1 verdicts over √n
	}
	return p, sem, nil
}

// checkStage is a check stage under way: sctx ends with its budget, ctx
// with the activity.
type checkStage struct {
	a                  *Evaluations
	ctx, sctx          context.Context
	d                  *safefs.Dir
	ev                 *workspace.EvalDirs
	task               *tasks.Spec
	image              string
	passed, unfinished atomic.Int64
}

// item checks output i (name); one left when the budget has passed
// fails, and only the activity's end or a check that cannot start is an
// error.
func (st *checkStage) item(i int, name string) error {
	if st.sctx.Err() != nil {
		st.unfinished.Add(1)
		return st.ctx.Err()
	}
	c, a := st.task.Evaluation.Check, st.a
	item, err := copyItem(st.d, name, filepath.Join(st.ev.Dir, "check", fmt.Sprint(i)))
	if err != nil {
		a.Logger.Info("output not checked: it fails", zap.String("output", name), zap.Error(err))
		return nil
	}
	spec := a.Sandbox.Workspace.CheckTask(st.ev, item, name, c.Command, st.image)
	spec.Name = fmt.Sprintf("%s-check-%d", st.ev.Name, i)
	spec.Labels = map[string]string{runtime.LabelRole: "check"}
	a.Sandbox.Bound(&spec, st.task)
	ok, err := a.check(st.sctx, spec, c.Timeout.D())
	switch {
	case ok:
		st.passed.Add(1)
	case err != nil && st.ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		st.unfinished.Add(1)
		return nil
	}
	return err
}

// check runs one check to its end (passed: exit status 0) or its timeout
// (failed); only a check that cannot start, or the activity's end, is an
// error.
func (a *Evaluations) check(ctx context.Context, spec runtime.TaskSpec, timeout time.Duration) (bool, error) {
	res, timedOut, err := a.Sandbox.RunToEnd(ctx, spec, "", timeout, a.Logger)
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err()
	case err != nil:
		return false, fmt.Errorf("start check %s: %w", spec.Name, err)
	}
	return !timedOut && res.Successful(), nil
}

// copyItem copies the output name (a regular file of d, at most
// maxCheckItemBytes) into dir, under the same name.
func copyItem(d *safefs.Dir, name, dir string) (string, error) {
	f, st, err := d.Open(name, nil)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	if st.Size > maxCheckItemBytes {
		return "", fmt.Errorf("%d bytes, more than %d", st.Size, maxCheckItemBytes)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(out, io.LimitReader(f, maxCheckItemBytes))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return p, err
}

// setRate writes a check's pass rate into the results, over whatever the
// evaluator wrote there: results.<task>.<field>, and its standard error
// as lm-eval names it (compile_rate,none: compile_rate_stderr,none).
func setRate(r *lmeval.Results, c *tasks.Check, rate, sem float64) {
	if r.Results[c.Task] == nil {
		r.Results[c.Task] = map[string]any{"alias": c.Task}
	}
	r.Results[c.Task][c.Field] = rate
	metric, filter, _ := strings.Cut(c.Field, ",")
	stderr := metric + "_stderr"
	if filter != "" {
		stderr += "," + filter
	}
	r.Results[c.Task][stderr] = sem
}
