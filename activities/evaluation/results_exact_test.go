package evaluation

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/lmeval"
	"github.com/mlrb/mlrb/tasks"
)

func evalLayout(t *testing.T) *workspace.EvalDirs {
	t.Helper()
	dir := t.TempDir()
	ev := &workspace.EvalDirs{Name: "eval-t-1", Dir: dir, Results: filepath.Join(dir, "results"), Outputs: filepath.Join(dir, "outputs"), ResultsName: workspace.ResultsName(), Task: "t"}
	for _, d := range []string{ev.Results, ev.Outputs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return ev
}

func writeFile(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	trueResults    = `{"results": {"t": {"acc,none": 0.42}}}`
	plantedResults = `{"results": {"t": {"acc,none": 0.99}}}`
)

// TestOnlyTheNamedResultsFileIsRead (audit #3, #11): the worker read the
// alphabetically last results*.json under the results dir, so a file
// planted beside the evaluator's (results_9999.json) was the score. It
// reads the name it chose, and nothing else.
func TestOnlyTheNamedResultsFileIsRead(t *testing.T) {
	ev := evalLayout(t)
	writeFile(t, filepath.Join(ev.Results, ev.ResultsName), trueResults)
	writeFile(t, filepath.Join(ev.Results, "results_9999.json"), plantedResults)
	writeFile(t, filepath.Join(ev.Results, "zz", "results_9999.json"), plantedResults)
	name, b, err := readResults(ev, []string{"eval", "{results}"})
	if err != nil || name != ev.ResultsName || string(b) != trueResults {
		t.Fatalf("read %s: %s, %v", name, b, err)
	}
	// A command that names no file: more than one is refused.
	if _, _, err := readResults(ev, []string{"eval", "{output}"}); err == nil || !strings.Contains(err.Error(), "cannot be told") {
		t.Fatalf("several results files: %v", err)
	}
	// The named file as a link to the host, or a FIFO: refused, never
	// followed or waited on.
	_ = os.Remove(filepath.Join(ev.Results, ev.ResultsName))
	host := filepath.Join(t.TempDir(), "host.json")
	writeFile(t, host, plantedResults)
	if err := os.Symlink(host, filepath.Join(ev.Results, ev.ResultsName)); err != nil {
		t.Fatal(err)
	}
	if _, b, err := readResults(ev, []string{"{results}"}); err == nil {
		t.Fatalf("a results link was read: %s", b)
	}
}

// TestChecksScoreByExitStatusOnly: each output is checked on its own and
// only the exit status counts; what the evaluator claimed for the rate is
// replaced by the worker's count.
func TestChecksScoreByExitStatusOnly(t *testing.T) {
	ev := evalLayout(t)
	for name, body := range map[string]string{"0.lean": "theorem a : true := trivial -- QED", "1.lean": "theorem b : true := sorry",
		"2.lean": "-- QED", "3.lean": "nothing"} {
		writeFile(t, filepath.Join(ev.Outputs, name), body)
	}
	host := filepath.Join(t.TempDir(), "host.lean")
	writeFile(t, host, "-- QED")
	if err := os.Symlink(host, filepath.Join(ev.Outputs, "4.lean")); err != nil {
		t.Fatal(err)
	}
	proc, err := runtime.NewProcess(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := &Evaluations{Sandbox: &workspace.Sandbox{Workspace: &workspace.DirWorkspace{Process: proc}, Logger: zap.NewNop()}, Logger: zap.NewNop()}
	c := &tasks.Check{Command: []string{"sh", "-c", `grep -q QED "$0" && ! grep -q sorry "$0"`, "{item}"}, Timeout: tasks.Duration(30e9),
		Task: "t", Field: "compile_rate,none"}
	rate, sem, err := a.runChecks(context.Background(), ev, &tasks.Spec{Evaluation: tasks.Evaluation{Check: c}}, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if rate != 0.4 || sem <= 0 {
		t.Fatalf("rate %v ± %v; want 2 of 5 (the link counts as a failure)", rate, sem)
	}
	r, err := lmeval.Parse([]byte(`{"results": {"t": {"bleu,none": 0.3, "compile_rate,none": 1.0}}}`), "r")
	if err != nil {
		t.Fatal(err)
	}
	setRate(r, c, rate, sem)
	if r.Results["t"]["compile_rate,none"] != 0.4 || r.Results["t"]["compile_rate_stderr,none"] != sem {
		t.Fatalf("results %v", r.Results)
	}
}

// Audit M1: outputs whose checks never end (a proof that loops at
// compile time) fail their checks when the stage's budget passes; the
// stage ends with the model's own low rate, never an evaluation error
// the agent could choose.
func TestChecksThatOverrunFailTheirItems(t *testing.T) {
	ev := evalLayout(t)
	writeFile(t, filepath.Join(ev.Outputs, "0.lean"), "-- QED")
	for i := 1; i < 6; i++ {
		writeFile(t, filepath.Join(ev.Outputs, strconv.Itoa(i)+".lean"), "run_cmd loop 0")
	}
	proc, err := runtime.NewProcess(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := &Evaluations{Sandbox: &workspace.Sandbox{Workspace: &workspace.DirWorkspace{Process: proc}, Logger: zap.NewNop()}, Logger: zap.NewNop()}
	c := &tasks.Check{Command: []string{"sh", "-c", `grep -q QED "$0" || exec sleep 600`, "{item}"}, Timeout: tasks.Duration(10 * time.Minute),
		Task: "t", Field: "compile_rate,none", Parallel: 2}
	rate, _, err := a.runChecks(context.Background(), ev, &tasks.Spec{Evaluation: tasks.Evaluation{Check: c}}, "", 3*time.Second)
	if err != nil || rate > 1.0/6+1e-9 {
		t.Fatalf("rate %v, %v; want at most 1 of 6 and no error", rate, err)
	}
}
