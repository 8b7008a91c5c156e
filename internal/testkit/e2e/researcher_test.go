package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
)

const researcherImage = "mlrb-researcher:e2e"

// solveScript is a research conversation any mini LM task takes: the
// task's training tool run once, a richer model trained as a job, the
// job waited for, the model submitted.
func solveScript(train string) []llmfake.Turn {
	return []llmfake.Turn{
		{Want: []string{"ML research agent", "Begin. Attempt 1"}, Text: "A baseline first.",
			Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": train + " --out output/baseline"}}}},
		{Want: []string{"validation=", "saved=output/baseline"},
			Calls: []llmfake.ToolCall{{Name: "job_start", Args: map[string]any{"command": train + " order=2 lambda=0.8 --out output/model"}}}},
		{Want: []string{"started job-1"}, Calls: []llmfake.ToolCall{{Name: "job_check", Args: map[string]any{"id": "job-1", "wait_s": 120}}}},
		{Want: []string{"job-1 exited", "exit 0", "saved=output/model"},
			Calls: []llmfake.ToolCall{{Name: "submit", Args: map[string]any{"model_dir": "output/model", "done": true}}}},
	}
}

// scriptsByTask serves each run its own script, told apart by the task
// its system prompt names.
func scriptsByTask(scripts map[string][]llmfake.Turn) *llmfake.Script {
	var mu sync.Mutex
	return &llmfake.Script{Next: func(pos int, body []byte) (llmfake.Turn, error) {
		mu.Lock()
		defer mu.Unlock()
		texts := llmfake.Texts(body)
		for task, turns := range scripts {
			if strings.Contains(texts, "The task ("+task+")") && pos < len(turns) {
				return turns[pos], nil
			}
		}
		return llmfake.Turn{}, os.ErrNotExist
	}}
}

// TestResearcherSolvesMiniTasks: mlrb's LLM agent, in its busybox image
// (deploy/researcher.Dockerfile), on a scripted model through the real
// gateway, once per provider's official SDK (OpenAI's Chat Completions,
// Anthropic's Messages): its tools run in the container, a model is
// trained with the image's tool as a background job, submitted and
// scored, and the transcript and the ledger hold every call.
func TestResearcherSolvesMiniTasks(t *testing.T) {
	parallel(t)
	tasks := []string{"mini_baby_lm", "mini_mini_pile"}
	scripts := map[string][]llmfake.Turn{}
	for _, task := range tasks {
		scripts[task] = solveScript("mlrb train")
	}
	script := scriptsByTask(scripts)
	fake := &llmfake.Fake{OpenAIKey: gwOpenAIKey, AnthropicKey: gwAnthropicKey, Script: script}
	up, err := fake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	envFile := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY="+gwOpenAIKey+"\nANTHROPIC_API_KEY="+gwAnthropicKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	buildBusyboxImage(t, researcherImage, "researcher.Dockerfile")
	dir := agentDefs(t, map[string]string{
		"res-openai":    "image: " + researcherImage + "\nprovider: openai\nmodel: gpt-4o\nargs: [/mlrb, researcher]\nllm_budget_usd: 2\n",
		"res-anthropic": "image: " + researcherImage + "\nprovider: anthropic\nmodel: claude-sonnet-4-20250514\nargs: [/mlrb, researcher]\nllm_budget_usd: 2\n",
	})
	e := dockerEnv(t, "MLRB_AGENT_ENV_FILE="+envFile, "MLRB_GATEWAY_OPENAI_URL="+up+"/v1", "MLRB_GATEWAY_ANTHROPIC_URL="+up,
		"MLRB_AGENTS_DIR="+dir, "MLRB_CHECKPOINT_INTERVAL=3s")
	e.start("worker", "--dev")
	e.waitServer()
	const b = "researcher-mini"
	if _, errs, code := e.starter("benchmark", "--agents", "res-openai,res-anthropic", "--tasks", strings.Join(tasks, ","), "--seeds", "1",
		"--time-limit", "3m", "--concurrency", "4", "--id", b); code != 0 {
		t.Fatalf("benchmark: %s", errs)
	}
	e.awaitBenchmark(b)
	if err := script.Err(); err != nil {
		e.dumpLogs()
		t.Fatal(err)
	}
	for _, agent := range []string{"res-openai", "res-anthropic"} {
		for _, task := range tasks {
			id := b + "/" + agent + "/" + task + "/s1"
			var res runs.Result
			e.starterJSON(&res, "result", id, "--json")
			if res.Outcome != runs.OutcomeScored || res.Score == nil || res.Cost.LLM == nil || res.Cost.LLM.Calls != 4 || res.Cost.LLM.USD <= 0 {
				e.dumpLogs()
				t.Fatalf("%s: outcome %s, score %v, llm %+v", id, res.Outcome, res.Score, res.Cost.LLM)
			}
			out, errs, code := e.starter("calls", id, "--json")
			if code != 0 {
				t.Fatalf("calls %s: %s", id, errs)
			}
			var apis []llm.API
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var c transcript.Call
				if err := json.Unmarshal([]byte(line), &c); err == nil && c.Kind == transcript.KindLLM && c.Stream && c.Status == 200 {
					apis = append(apis, c.API)
				}
			}
			want := llm.ChatCompletions
			if agent == "res-anthropic" {
				want = llm.Messages
			}
			if len(apis) != 4 || slices.ContainsFunc(apis, func(a llm.API) bool { return a != want }) {
				t.Fatalf("%s: the transcript's streamed LLM calls are %v, want 4 of %s", id, apis, want)
			}
			t.Logf("%s: score %.4f, %d calls, $%.4f", id, *res.Score, res.Cost.LLM.Calls, res.Cost.LLM.USD)
		}
	}
}
