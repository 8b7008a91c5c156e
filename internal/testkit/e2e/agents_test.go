package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
	"github.com/mlrb/mlrb/workflows"
)

// agentDefs writes agent definitions into a directory the worker and
// the starter read as agents.dir.
func agentDefs(t *testing.T, defs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range defs {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte("name: "+name+"\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// awaitBenchmark waits for a benchmark through the SDK client (a starter
// command is bounded at 3 minutes).
func (e *env) awaitBenchmark(id string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var res workflows.BenchmarkResult
	if err := e.client().GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
		e.dumpLogs()
		e.t.Fatalf("benchmark %s: %v", id, err)
	}
}

// TestBenchmarkOfImageAgents: two image agents compared on three mini
// tasks × three seeds, in real containers: the reference agent's image
// (its research loop, told model gpt-4o) and an agent that does its work
// through LLM calls to the gateway (the official SDKs against the
// wire-level provider fake), defined twice with one image and two models.
// One leaderboard holds both, with paired comparisons over shared seeds,
// and every run's result records its agent's name, definition hash,
// image digest, provider and model. Then a campaign: the benchmark is
// extended by the second model (only its runs run), a second benchmark
// of the same agent is pooled with the first by results, report and
// export, and a third, whose task spec changed, is refused as one
// population (and shown apart with --allow-mixed).
func TestBenchmarkOfImageAgents(t *testing.T) {
	parallel(t)
	fake := &llmfake.Fake{OpenAIKey: gwOpenAIKey, AnthropicKey: gwAnthropicKey, Words: 10}
	up, err := fake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	envFile := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY="+gwOpenAIKey+"\nANTHROPIC_API_KEY="+gwAnthropicKey+"\nHUGGINGFACE_TOKEN=hf_e2e_agents\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	buildImage(t, "mlrb-llmagent:e2e", "llmagent", staticBinary(t, "internal/testkit/e2e/testdata/llmagent"),
		"FROM scratch\nCOPY llmagent /llmagent\nCMD [\"/llmagent\"]\n")
	dir := agentDefs(t, map[string]string{
		"ref-4o":      "image: " + refImage + "\nprovider: openai\nmodel: gpt-4o\nargs: [/mlrb, reference-agent]\n",
		"llm-4o":      "image: mlrb-llmagent:e2e\nprovider: openai\nmodel: gpt-4o\nsecrets: [HUGGINGFACE_TOKEN]\nllm_budget_usd: 2\n",
		"llm-4o-mini": "image: mlrb-llmagent:e2e\nprovider: openai\nmodel: gpt-4o-mini\nsecrets: [HUGGINGFACE_TOKEN]\nllm_budget_usd: 2\n",
	})
	e := dockerEnv(t, "MLRB_AGENT_ENV_FILE="+envFile, "MLRB_GATEWAY_OPENAI_URL="+up+"/v1", "MLRB_GATEWAY_ANTHROPIC_URL="+up,
		"MLRB_AGENTS_DIR="+dir, "MLRB_CHECKPOINT_INTERVAL=3s")
	w := e.start("worker", "--dev")
	e.waitServer()

	if out, errs, code := e.starter("agents", "list"); code != 0 || !strings.Contains(out, "llm-4o-mini") || !strings.Contains(out, "mlrb-gpt-4o") {
		t.Fatalf("agents list (exit %d): %s %s", code, out, errs)
	}
	tasks := "mini_baby_lm,mini_mini_pile,mini_edge_llm_training"
	const b1 = "cmp-agents"
	if _, errs, code := e.starter("benchmark", "--agents", "ref-4o,llm-4o", "--tasks", tasks, "--seeds", "3", "--time-limit", "12s",
		"--concurrency", "4", "--id", b1); code != 0 {
		t.Fatalf("benchmark: %s", errs)
	}
	e.awaitBenchmark(b1)
	var board struct {
		Rows []struct {
			Task, Agent   string
			Runs, Scored  int
			CIMethod      string   `json:"ci_method"`
			SuccessRate   *float64 `json:"success_rate"`
			CI95          []float64
			MeanFailures  *float64 `json:"mean_with_failures"`
			AgentFailures int      `json:"agent_failed"`
		} `json:"rows"`
		Paired []struct {
			Task, A, B string
			N          int
			P          *float64 `json:"p"`
		} `json:"paired"`
		Agents []struct{ Agent string } `json:"agents"`
	}
	e.starterJSON(&board, "results", b1, "--format", "json")
	if len(board.Rows) != 6 || len(board.Paired) != 3 || len(board.Agents) != 2 {
		t.Fatalf("leaderboard: %d rows, %d pairs, %d agents; want 6, 3, 2", len(board.Rows), len(board.Paired), len(board.Agents))
	}
	for _, r := range board.Rows {
		if r.Runs != 3 || r.Scored != 3 || r.CIMethod != "t" || r.SuccessRate == nil || *r.SuccessRate != 1 {
			out, _, _ := e.starter("results", b1)
			t.Fatalf("row %+v:\n%s", r, out)
		}
	}
	for _, p := range board.Paired {
		if p.N != 3 || p.P == nil || p.A != "ref-4o" {
			t.Fatalf("pair %+v: want ref-4o ahead over 3 shared seeds", p)
		}
	}
	table, _, _ := e.starter("results", b1)
	t.Logf("leaderboard of two image agents:\n%s", table)

	// Every run's result names its agent, definition, image and model.
	exp := t.TempDir()
	if out, errs, code := e.starter("export", b1, "--format", "csv", "-o", exp); code != 0 {
		t.Fatalf("export (exit %d): %s %s", code, out, errs)
	}
	hashes := map[string]string{}
	for _, r := range readCSV(t, filepath.Join(exp, "runs.csv")) {
		if !strings.HasPrefix(r["agent_image"], "sha256:") || !strings.HasPrefix(r["agent_definition_hash"], "sha256:") || r["provider"] != "openai" || r["model"] != "gpt-4o" {
			t.Fatalf("run %s: agent image %q, definition %q, provider %q, model %q", r["run_id"], r["agent_image"], r["agent_definition_hash"], r["provider"], r["model"])
		}
		if h, ok := hashes[r["agent"]]; ok && h != r["agent_definition_hash"] {
			t.Fatalf("agent %s ran under two definitions", r["agent"])
		}
		hashes[r["agent"]] = r["agent_definition_hash"]
	}
	var one runs.Result
	e.starterJSON(&one, "result", b1+"/llm-4o/mini_baby_lm/s1", "--json")
	if d := one.AgentDef; d == nil || d.Name != "llm-4o" || d.Model != "gpt-4o" || !strings.HasPrefix(d.Image, "sha256:") || one.Cost.LLM == nil || one.Cost.LLM.Calls != 5 {
		t.Fatalf("result of an llm-4o run: agent %+v, llm %+v", one.AgentDef, one.Cost.LLM)
	}

	// Extended by the second model: only its nine runs run.
	out, errs, code := e.starter("benchmark", "extend", b1, "--agents", "llm-4o-mini")
	if code != 0 || !strings.Contains(out, "18 runs kept, 9 to run") {
		t.Fatalf("extend (exit %d): %s %s", code, out, errs)
	}
	e.awaitBenchmark(b1)
	// Histories of the new paths join the replay corpus: a benchmark that
	// pinned its agents' images (its extended execution pinned the new
	// one), and an image agent's run.
	replayHistory(t, e, b1, "benchmark_of_image_agents.json")
	replayHistory(t, e, b1+"/llm-4o-mini/mini_baby_lm/s2", "image_agent_run.json")
	e.starterJSON(&board, "results", b1, "--format", "json")
	if len(board.Rows) != 9 || len(board.Agents) != 3 {
		t.Fatalf("after extend: %d rows, %d agents", len(board.Rows), len(board.Agents))
	}
	mini, errs, code := e.starter("calls", b1+"/llm-4o-mini/mini_baby_lm/s2", "--json")
	if code != 0 {
		t.Fatalf("calls: %s", errs)
	}
	var models []string
	for _, line := range strings.Split(strings.TrimSpace(mini), "\n") {
		var c transcript.Call
		if err := json.Unmarshal([]byte(line), &c); err == nil && c.Kind == transcript.KindLLM {
			models = append(models, c.Model)
		}
	}
	if len(models) != 5 || models[0] != "gpt-4o-mini" || models[1] != "gpt-4o-mini" {
		t.Fatalf("the llm-4o-mini agent called %v: its model did not reach it", models)
	}

	// A second benchmark of one agent pools with the first.
	const b2 = "cmp-agents-2"
	if _, errs, code := e.starter("benchmark", "--agents", "llm-4o", "--tasks", "mini_baby_lm", "--seeds", "2", "--time-limit", "12s", "--id", b2); code != 0 {
		t.Fatalf("second benchmark: %s", errs)
	}
	e.awaitBenchmark(b2)
	e.starterJSON(&board, "results", b1, b2, "--format", "json")
	pooled := 0
	for _, r := range board.Rows {
		if r.Task == "mini_baby_lm" && r.Agent == "llm-4o" {
			pooled = r.Runs
		}
	}
	if pooled != 5 {
		t.Fatalf("pooled llm-4o on mini_baby_lm: %d runs, want 3 + 2", pooled)
	}
	exp2 := t.TempDir()
	if out, errs, code := e.starter("export", b1, b2, "--format", "csv", "-o", exp2); code != 0 || !strings.Contains(out, "exported 29 runs") {
		t.Fatalf("pooled export (exit %d): %s %s", code, out, errs)
	}
	benches := map[string]int{}
	for _, r := range readCSV(t, filepath.Join(exp2, "runs.csv")) {
		benches[r["benchmark_id"]]++
	}
	if benches[b1] != 27 || benches[b2] != 2 {
		t.Fatalf("pooled export's runs by benchmark: %v", benches)
	}
	rep := t.TempDir()
	if out, errs, code := e.starter("report", b1, b2, "-o", rep); code != 0 || !strings.Contains(out, "29 runs") {
		t.Fatalf("pooled report (exit %d): %s %s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(rep, "index.html")); err != nil {
		t.Fatal(err)
	}

	// The task's spec changes (the worker reads its catalog when it
	// starts): its runs are another experiment.
	e.addTask("mini_baby_lm", "mini_baby_lm", map[string]string{"trials: 24": "trials: 20"})
	w.stop(t, time.Minute)
	e.start("worker", "--dev")
	e.waitServer()
	const b3 = "cmp-agents-3"
	if _, errs, code := e.starter("benchmark", "--agents", "llm-4o", "--tasks", "mini_baby_lm", "--seeds", "1", "--time-limit", "12s", "--id", b3); code != 0 {
		t.Fatalf("third benchmark: %s", errs)
	}
	e.awaitBenchmark(b3)
	out, errs, code = e.starter("results", b1, b3)
	if code != 2 || !strings.Contains(errs, "task mini_baby_lm, agent llm-4o: the task spec hash differs") || !strings.Contains(errs, "--allow-mixed") {
		t.Fatalf("a pool across a changed spec (exit %d): %s %s", code, out, errs)
	}
	out, errs, code = e.starter("results", b1, b3, "--allow-mixed")
	if code != 0 || !strings.Contains(out, "llm-4o ["+b1+"]") || !strings.Contains(out, "llm-4o ["+b3+"]") {
		t.Fatalf("--allow-mixed (exit %d): %s %s", code, out, errs)
	}
	if _, errs, code := e.starter("results", b1+"/llm-4o/mini_baby_lm/s1"); code != 2 || !strings.Contains(errs, "is a run, not a benchmark") {
		t.Fatalf("results of a run id (exit %d): %s", code, errs)
	}
	if _, errs, code := e.starter("result", b1); code != 2 || !strings.Contains(errs, "is a benchmark, not a run") {
		t.Fatalf("result of a benchmark id (exit %d): %s", code, errs)
	}
}
