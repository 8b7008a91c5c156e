package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/scoring/evaldata"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// TestEvaluationDataEndToEnd: a task whose evaluator reads a held-out
// set (evaluation.data) is scored when the worker holds the set, the
// evaluator reading it where the worker put it, and the set's hash is in
// the result and the run's bundle; with the set gone, or changed, the
// run is refused at its start naming the task, the path and the hash,
// before any agent runs.
func TestEvaluationDataEndToEnd(t *testing.T) {
	parallel(t)
	dataDir := t.TempDir()
	held := filepath.Join(dataDir, "mini", "heldout.jsonl")
	if err := os.MkdirAll(filepath.Dir(held), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(held, []byte("{\"informal\": \"two plus two\", \"formal\": \"2 + 2 = 4\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := evaldata.Digest(held)
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(t.TempDir(), "operator")
	e := newEnv(t, "MLRB_EVAL_DATA_DIR="+dataDir, "MLRB_BUNDLE_SIGNING_KEY="+keys)
	if _, errs, code := e.starter("keys", "new", "-o", keys); code != 0 {
		t.Fatalf("keys new: %s", errs)
	}
	// The evaluator refuses to score without the set it was given.
	e.addTask("e2e_heldout", "mini_math_reasoning", map[string]string{
		`  command: ["{self}", reference-eval,`: `  command: [/bin/sh, -c, 'test -s "$0" && exec "$@"', "{data:mini/heldout.jsonl}", "{self}", reference-eval,`,
		"  timeout: 2m\n":                       "  timeout: 2m\n  data:\n    - name: mini/heldout.jsonl\n      sha256: " + sum + "\n      source: written by the test\n",
	})
	e.start("worker", "--dev")
	e.waitServer()

	id := e.startRun("--task", "e2e_heldout", "--agent", "reference", "--seed", "1", "--time-limit", "6s")
	var res result
	e.starterJSON(&res, "result", id, "--wait", "--json")
	if (res.Outcome != "scored" && res.Outcome != "limit_reached") || res.Score == nil {
		e.dumpLogs()
		t.Fatalf("with its data: %+v", res)
	}
	raw, _, _ := e.starter("result", id, "--json")
	if !strings.Contains(raw, `"evaluation_data/mini/heldout.jsonl":"`+sum+`"`) && !strings.Contains(raw, `"evaluation_data/mini/heldout.jsonl": "`+sum+`"`) {
		t.Fatalf("the result does not name the data's hash %s:\n%s", sum, raw)
	}
	out := filepath.Join(t.TempDir(), "bundle")
	if so, errs, code := e.starter("bundle", id, "-o", out); code != 0 {
		t.Fatalf("bundle (exit %d): %s %s", code, so, errs)
	}
	kept, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(blob.RunPrefix(id)), "result.json"))
	if err != nil || !bytes.Contains(kept, []byte(sum)) {
		t.Fatalf("the bundle's result does not carry the data's hash: %v %s", err, kept)
	}

	refused := func(why string) {
		t.Helper()
		id := e.startRun("--task", "e2e_heldout", "--agent", "reference", "--seed", "2", "--time-limit", "6s", "--id", "heldout-"+why)
		var res result
		e.starterJSON(&res, "result", id, "--wait", "--json")
		for _, want := range []string{"e2e_heldout", held, sum} {
			if !strings.Contains(res.Reason, want) {
				t.Fatalf("%s: the refusal %q does not name %s", why, res.Reason, want)
			}
		}
		if res.Outcome == "scored" || res.Attempts != 0 {
			t.Fatalf("%s: a run without its data must not start: %+v", why, res)
		}
	}
	if err := os.WriteFile(held, []byte("{\"informal\": \"two plus two\", \"formal\": \"2 + 2 = 5\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused("changed")
	if err := os.Remove(held); err != nil {
		t.Fatal(err)
	}
	refused("absent")
}
