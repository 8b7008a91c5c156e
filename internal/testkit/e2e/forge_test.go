package e2e

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestForgedScoreNeverCounts: a model whose outputs are code (as Lean 3
// proofs are) tries to write its own score three ways: its outputs' meta
// code writes a results_9999.json into /results and rewrites another
// output, the model dir holds a results_9999.json that the evaluator
// copies beside its own, and (a second run) it ships pickled weights. The
// first run ends with the true share of outputs that check (1 of 3), the
// second agent_failed, never 0.99.
//
// On the code before, the Lean compile ran in the evaluator's own
// container with /results writable, and the worker scored the
// alphabetically last results*.json: results_9999.json.
func TestForgedScoreNeverCounts(t *testing.T) {
	parallel(t)
	testtaskImage(t, "mlrb-forger:e2e", "forger")
	testtaskImage(t, "mlrb-pickler:e2e", "pickler")
	buildImage(t, "mlrb-forge-eval:e2e", "forgeeval", staticBinary(t, "internal/testkit/e2e/testdata/forgeeval"),
		"FROM scratch\nCOPY forgeeval /forgeeval\n")
	e := dockerEnv(t)
	envFile := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY=sk-e2e-unused\nHUGGINGFACE_TOKEN=hf-e2e-unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.vars = append(e.vars, "MLRB_AGENT_ENV_FILE="+envFile)
	e.addTask("e2e_forge", "mini_math_reasoning", map[string]string{
		"  name: bleu": "  name: compile_rate",
		`    - {task: mlrb_autoformalization, field: "bleu,none"}`: `    - {task: forge, field: "compile_rate,none"}`,
		`  command: ["{self}", reference-eval, --task, "{task}", --seed, "{seed}", --model, "{model}", --results_file, "{results}"]`: `  command: [/forgeeval, generate, --model, "{model}", --results, "{results}", --outputs, "{outputs}"]
  image: mlrb-forge-eval:e2e
  check:
    command: [/forgeeval, check, "{item}"]
    timeout: 30s
    task: forge
    field: "compile_rate,none"
    parallel: 2`,
	})
	e.start("worker", "--dev")
	e.waitServer()

	var res result
	e.starterJSON(&res, "run", "--task", "e2e_forge", "--label", "e2e-image", "--image", "mlrb-forger:e2e", "--provider", "openai",
		"--seed", "1", "--wait", "--json")
	if res.Outcome != "scored" || res.Score == nil || math.Abs(*res.Score-1.0/3) > 1e-9 {
		e.dumpLogs()
		t.Fatalf("the forger's run: %+v; want scored 1/3 (one output of three checks)", res)
	}
	if se := res.Metrics["forge/compile_rate_stderr,none"]; se != 0 {
		t.Logf("compile rate %.4f ± %.4f", *res.Score, se)
	}
	for k, v := range res.Metrics {
		if v == 0.99 {
			t.Fatalf("a planted number reached the result: %s = %v", k, v)
		}
	}

	e.starterJSON(&res, "run", "--task", "e2e_forge", "--label", "e2e-image", "--image", "mlrb-pickler:e2e", "--provider", "openai",
		"--seed", "2", "--wait", "--json")
	if res.Outcome != "agent_failed" || res.Score != nil || !strings.Contains(res.Reason, "pickled weights are refused") {
		e.dumpLogs()
		t.Fatalf("pickled weights: %+v; want agent_failed naming them", res)
	}
}

// TestModelThatBreaksItsEvaluator (audit F1): a model that passes every
// check but crashes its evaluator is the agent's failure, not the
// evaluator's: the same evaluator, in the same place, scores the task's
// untrained reference model, so the run ends agent_failed saying so,
// counted in the agent's success rate, never evaluation_failed (which a
// benchmark re-runs and never counts).
func TestModelThatBreaksItsEvaluator(t *testing.T) {
	parallel(t)
	testtaskImage(t, "mlrb-breaker:e2e", "breaker")
	e := containerAgentEnv(t)
	var res result
	e.starterJSON(&res, "run", "--task", "e2e_container", "--label", "e2e-image", "--image", "mlrb-breaker:e2e", "--provider", "openai",
		"--seed", "1", "--wait", "--json")
	if res.Outcome != "agent_failed" || res.Score != nil || !strings.Contains(res.Reason, "the model crashed the evaluator") ||
		!strings.Contains(res.Reason, "untrained reference model") {
		e.dumpLogs()
		t.Fatalf("a model that crashes its evaluator: %+v; want agent_failed naming the crash and the control", res)
	}
	t.Logf("reason: %s", res.Reason)
}
