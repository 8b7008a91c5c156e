package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/internal/results/anchors"
	"github.com/mlrb/mlrb/internal/results/controls"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/evaldata"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
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
	cat, err := tasks.Load(filepath.Join("..", "..", "tasks", "catalog"))
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
	a := &Evaluations{Runs: host.Runs{Engine: engine}, Host: &host.Host{WorkDir: filepath.Join(dir, "work")}, Logger: zap.NewNop(),
		Sandbox: &workspace.Sandbox{Workspace: &workspace.DirWorkspace{Process: proc, Engine: engine, Self: "/bin/false"}, Logger: zap.NewNop()}}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	return &controlRig{a: a, broken: broken, task: task, env: env}
}

// checkpointModel saves a run's checkpoint holding a model whose weights
// read weights.
func (r *controlRig) checkpointModel(t *testing.T, runID, weights string) activities.CheckpointRef {
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
		"junk.bin":                 strings.Repeat("j", 64<<10),
	} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := r.a.Runs.Engine.Save(context.Background(), ws, checkpoint.Meta{RunID: runID, Seq: 1, Attempt: 1, Final: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return activities.CheckpointRef{Seq: m.Seq, Attempt: m.Attempt}
}

func (r *controlRig) evaluate(runID string, ref activities.CheckpointRef) (*activities.EvalResult, error) {
	v, err := r.env.ExecuteActivity(r.a.Evaluate, activities.EvalInput{RunID: runID, Task: r.task, Final: ref, N: 1})
	if err != nil {
		return nil, err
	}
	var res activities.EvalResult
	return &res, v.Get(&res)
}

// keepResult stores a scored run's result as the run workflow would.
func (r *controlRig) keepResult(t *testing.T, runID string, res *activities.EvalResult, ref activities.CheckpointRef, violations ...string) {
	t.Helper()
	score := res.Score
	b, err := json.Marshal(runs.Result{RunID: runID, Task: r.task.ID, Outcome: runs.OutcomeScored, Score: &score, ModelPath: res.ModelPath,
		Violations: violations, EvaluatorImage: res.Image, CheckpointLog: []runs.CheckpointInfo{{Seq: ref.Seq, Attempt: ref.Attempt, Final: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := runresults.Put(context.Background(), r.a.Runs.Engine.Store, runID, b); err != nil {
		t.Fatal(err)
	}
}

// TestAModelThatBreaksItsEvaluatorIsBlamed (audits F1, M3): on a task
// without a reference model, a model that crashes the evaluator is the
// agent's failure (ErrModelBrokeEvaluator, naming the control) only
// against the task's own control, one chosen for it (the baseline
// anchor's model, or the operator's), never whichever agent's model was
// scored first; an evaluator that fails on the control too stays the
// evaluator's, and without a control the run waits for an operator,
// told how to give it one. Only the control's model directory is
// restored, whatever else its workspace holds.
func TestAModelThatBreaksItsEvaluatorIsBlamed(t *testing.T) {
	r := newControlRig(t)
	ctx := context.Background()
	good := r.checkpointModel(t, "good", "fine")
	res, err := r.evaluate("good", good)
	if err != nil || res.Score != 0.75 {
		t.Fatalf("the good model: %+v, %v", res, err)
	}
	// A scored model is no control by being scored first.
	_, err = r.evaluate("crasher", r.checkpointModel(t, "crasher", "crash"))
	if err == nil || isBroke(err) || !strings.Contains(err.Error(), "anchors control shell_task --run") {
		t.Fatalf("before any control: %v; want the evaluator's failure, saying how to give the task a control", err)
	}
	r.keepResult(t, "good", res, good)
	// A baseline anchor measured here: its model is the task's own, and
	// the evaluator scores it where a model first fails it, then keeps it.
	if err := anchors.Put(ctx, r.a.Runs.Engine.Store, r.task.ID, anchors.Baseline, tasks.Anchor{Score: 0.75, RunID: "good", Evaluator: res.Image}); err != nil {
		t.Fatal(err)
	}
	_, err = r.evaluate("crasher2", r.checkpointModel(t, "crasher2", "crash"))
	if !isBroke(err) || !strings.Contains(err.Error(), "the baseline anchor") || !strings.Contains(err.Error(), "for the first time") {
		t.Fatalf("a crash with the baseline anchor's model as the candidate: %v", err)
	}
	if c, err := controls.Get(ctx, r.a.Runs.Engine.Store, r.task.ID, controls.EvaluatorOf(res.Image, &r.task)); err != nil || c == nil || c.RunID != "good" || c.Score != 0.75 {
		t.Fatalf("the candidate scored is not kept as the control: %+v, %v", c, err)
	}
	r.keepResult(t, "cheat", res, good, "max_params: 9 > 8")
	if _, err := controls.Set(ctx, r.a.Runs.Engine, &r.task, "cheat", "operator"); err == nil || !strings.Contains(err.Error(), "broke the task's rules") {
		t.Fatalf("a run that broke the rules as a control: %v", err)
	}
	other := r.task
	other.ID = "another_task"
	if _, err := controls.Set(ctx, r.a.Runs.Engine, &other, "good", "operator"); err == nil || !strings.Contains(err.Error(), "not another_task") {
		t.Fatalf("another task's run as a control: %v", err)
	}
	c, err := controls.Set(ctx, r.a.Runs.Engine, &r.task, "good", "the baseline anchor")
	if err != nil {
		t.Fatal(err)
	}
	if c.ModelPath != "output/model" || c.Bytes > 1024 {
		t.Fatalf("control = %+v; want its model dir alone (the junk beside it is not its size)", c)
	}
	_, err = r.evaluate("crasher", r.checkpointModel(t, "crasher", "crash"))
	if !isBroke(err) || !strings.Contains(err.Error(), "run good's model") || !strings.Contains(err.Error(), "crashed") || !strings.Contains(err.Error(), "the baseline anchor") {
		t.Fatalf("a crashing model: %v; want ModelBrokeEvaluator naming the control run", err)
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
	return errors.As(err, &ae) && ae.Type() == activities.ErrModelBrokeEvaluator
}

// TestATruncatedCheckpointIsNeverEvaluated: a checkpoint saved truncated
// (its workspace held more entries than the engine's bound) holds a model
// of sorts, but never reaches an evaluator: the run's failure (NoModel),
// naming the limit.
func TestATruncatedCheckpointIsNeverEvaluated(t *testing.T) {
	r := newControlRig(t)
	r.a.Runs.Engine.MaxEntries = 3
	_, err := r.evaluate("bomb", r.checkpointModel(t, "bomb", "fine"))
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.ErrNoModel || !strings.Contains(err.Error(), "agent.workspace_max_entries") {
		t.Fatalf("a truncated checkpoint: %v; want NoModel naming the limit", err)
	}
}

// TestAShippedControlNeedsNoOperator: a task whose evaluator ships its
// own control (evaluation.control, in its image or where a process host
// installs it) tells a model that breaks the evaluator from a broken
// evaluator on its very first run: no anchor, no operator.
func TestAShippedControlNeedsNoOperator(t *testing.T) {
	r := newControlRig(t)
	shipped := filepath.Join(t.TempDir(), "controls", "base")
	if err := os.MkdirAll(shipped, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shipped, "model.json"), []byte("fine"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.task.Evaluation.Control = &tasks.ControlModel{Model: "org/base", Revision: strings.Repeat("a", 40), Path: shipped}
	_, err := r.evaluate("crasher", r.checkpointModel(t, "crasher", "crash"))
	if !isBroke(err) || !strings.Contains(err.Error(), "the task's control org/base@aaaaaaaaaaaa") {
		t.Fatalf("a crash on the first run of a task with a shipped control: %v", err)
	}
	if err := os.WriteFile(filepath.Join(shipped, "model.json"), []byte("gone"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err = r.evaluate("crasher2", r.checkpointModel(t, "crasher2", "crash")); err == nil || isBroke(err) || !strings.Contains(err.Error(), "did not score") {
		t.Fatalf("the control failing too: %v; want the evaluator's failure", err)
	}
}

// TestEvaluationDataIsMountedAndRecorded: a task's evaluation.data is
// given to its evaluator as {data:NAME} once its hash is checked, and
// its digest goes into the result's provenance; a changed copy is never
// scored with.
func TestEvaluationDataIsMountedAndRecorded(t *testing.T) {
	r := newControlRig(t)
	root := t.TempDir()
	held := filepath.Join(root, "held", "test.txt")
	_ = os.MkdirAll(filepath.Dir(held), 0o755)
	if err := os.WriteFile(held, []byte("fine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := evaldata.Digest(held)
	if err != nil {
		t.Fatal(err)
	}
	r.a.Data = &evaldata.Dir{Root: root}
	results := `{"results":{"blimp":{"acc,none":0.5}},"configs":{},"versions":{}}`
	r.task.Evaluation.Command = []string{"/bin/sh", "-c", "grep -q fine {data:held/test.txt} && echo '" + results + "' > {results}"}
	r.task.Evaluation.Data = []tasks.EvalData{{Name: "held/test.txt", SHA256: sum, Source: "the test"}}
	res, err := r.evaluate("run", r.checkpointModel(t, "run", "fine"))
	if err != nil || res.Score != 0.5 || res.Provenance["evaluation_data/held/test.txt"] != sum {
		t.Fatalf("with its data: %+v, %v", res, err)
	}
	if err := os.WriteFile(held, []byte("fine, and more\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err = r.evaluate("run2", r.checkpointModel(t, "run2", "fine")); err == nil || !strings.Contains(err.Error(), "not the "+sum) {
		t.Fatalf("changed data: %v", err)
	}
}
