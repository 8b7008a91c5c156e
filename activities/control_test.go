package activities

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/blob"
	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/runtime"
	"github.com/mlrb/mlrb/tasks"
)

// controlRig is a worker that evaluates with a shell evaluator: it scores
// a model whose weights read "fine", exits 3 on "crash" and, once broken
// (the file broken exists), on anything.
type controlRig struct {
	a      *Evaluations
	broken string
	task   tasks.Spec
	env    *testsuite.TestActivityEnvironment
}

func newControlRig(t *testing.T) *controlRig {
	t.Helper()
	cat, err := tasks.Load(filepath.Join("..", "tasks", "catalog"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := cat.Get("mini_baby_lm")
	if err != nil {
		t.Fatal(err)
	}
	task := *spec
	task.ID = "shell_task"
	task.Reference = nil // a task of the full suite's kind: no reference model to control with
	task.Evaluation.Curve = nil
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken")
	results := `{"results":{"blimp":{"acc,none":0.75}},"configs":{},"versions":{}}`
	task.Evaluation.Command = []string{"/bin/sh", "-c", "test ! -e " + broken + " && grep -q fine {model}/model.json && echo '" + results + "' > {results} || exit 3"}
	task.Metric = tasks.Metric{Name: "acc", Aggregate: "single", Parts: []tasks.MetricPart{{Task: "blimp", Field: "acc,none"}}}
	store, err := blob.NewFS(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	engine := checkpoint.New(store, checkpoint.Options{ChunkSize: 1 << 20})
	proc, err := runtime.NewProcess(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	a := &Evaluations{&Runner{Runs: Runs{Engine: engine}, Host: Host{WorkDir: filepath.Join(dir, "work")}, Logger: zap.NewNop()}}
	a.Workspace = &DirWorkspace{Process: proc, Engine: engine, Self: "/bin/false"}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	return &controlRig{a: a, broken: broken, task: task, env: env}
}

// checkpointModel saves a run's checkpoint holding a model whose weights
// read weights.
func (r *controlRig) checkpointModel(t *testing.T, runID, weights string) CheckpointRef {
	t.Helper()
	ws := t.TempDir()
	model := filepath.Join(ws, "output", "model")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"output/model/config.json": `{"model_type":"mlrb-ngram","num_parameters":1,"torch_dtype":"float32"}`,
		"output/model/model.json":  weights,
		"output/submission.json":   `{"model_path":"output/model"}`,
	} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := r.a.Engine.Save(context.Background(), ws, checkpoint.Meta{RunID: runID, Seq: 1, Attempt: 1, Final: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return CheckpointRef{Seq: m.Seq, Attempt: m.Attempt}
}

func (r *controlRig) evaluate(runID string, ref CheckpointRef) (*EvalResult, error) {
	v, err := r.env.ExecuteActivity(r.a.Evaluate, EvalInput{RunID: runID, Task: r.task, Final: ref, N: 1})
	if err != nil {
		return nil, err
	}
	var res EvalResult
	return &res, v.Get(&res)
}

// TestAModelThatBreaksItsEvaluatorIsBlamed (audit F1): on a task without a
// reference model, the first model its evaluator scores becomes the
// control; a later model that crashes the evaluator is then the agent's
// failure (ErrModelBrokeEvaluator, naming the control), while an
// evaluator that fails on the control too stays the evaluator's, and
// before any control exists nothing is blamed on the agent.
func TestAModelThatBreaksItsEvaluatorIsBlamed(t *testing.T) {
	r := newControlRig(t)
	// No control yet: the crash cannot be told from a broken evaluator.
	_, err := r.evaluate("early-crasher", r.checkpointModel(t, "early-crasher", "crash"))
	if err == nil || isBroke(err) || !strings.Contains(err.Error(), "no control model yet") {
		t.Fatalf("before any control: %v; want the evaluator's failure, saying there is no control", err)
	}
	res, err := r.evaluate("good", r.checkpointModel(t, "good", "fine"))
	if err != nil || res.Score != 0.75 {
		t.Fatalf("the good model: %+v, %v", res, err)
	}
	_, err = r.evaluate("crasher", r.checkpointModel(t, "crasher", "crash"))
	if !isBroke(err) || !strings.Contains(err.Error(), "run good's model") || !strings.Contains(err.Error(), "crashed") {
		t.Fatalf("a crashing model: %v; want ModelBrokeEvaluator naming the control run", err)
	}
	// A second good model does not replace the control.
	if _, err := r.evaluate("good2", r.checkpointModel(t, "good2", "fine")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.broken, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = r.evaluate("victim", r.checkpointModel(t, "victim", "fine"))
	if err == nil || isBroke(err) || !strings.Contains(err.Error(), "did not score") {
		t.Fatalf("a broken evaluator: %v; want the evaluator's failure, its control failing too", err)
	}
}

func isBroke(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == ErrModelBrokeEvaluator
}

// TestATruncatedCheckpointIsNeverEvaluated: a checkpoint saved truncated
// (its workspace held more entries than the engine's bound) holds a model
// of sorts, but never reaches an evaluator: the run's failure (NoModel),
// naming the limit.
func TestATruncatedCheckpointIsNeverEvaluated(t *testing.T) {
	r := newControlRig(t)
	r.a.Engine.MaxEntries = 3
	_, err := r.evaluate("bomb", r.checkpointModel(t, "bomb", "fine"))
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != ErrNoModel || !strings.Contains(err.Error(), "agent.workspace_max_entries") {
		t.Fatalf("a truncated checkpoint: %v; want NoModel naming the limit", err)
	}
}
