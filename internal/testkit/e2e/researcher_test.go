package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
	provider := scriptedProvider(t, script)
	buildBusyboxImage(t, researcherImage, "researcher.Dockerfile")
	dir := agentDefs(t, map[string]string{
		"res-openai":    "image: " + researcherImage + "\nprovider: openai\nmodel: gpt-4o\nargs: [/mlrb, researcher]\nllm_budget_usd: 2\n",
		"res-anthropic": "image: " + researcherImage + "\nprovider: anthropic\nmodel: claude-sonnet-4-20250514\nargs: [/mlrb, researcher]\nllm_budget_usd: 2\n",
	})
	e := dockerEnv(t, provider.vars("MLRB_AGENTS_DIR="+dir, "MLRB_CHECKPOINT_INTERVAL=3s")...)
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

	// The finished run's conversation replayed against the agent, free:
	// the same seed makes every call as recorded; another seed's data
	// change a tool result, and the replay names the call.
	src := b + "/res-openai/mini_baby_lm/s1"
	served := len(script.Served())
	out, errs, code := e.starter("replay-calls", src)
	if code != 0 || !strings.Contains(out, "PASS: all 4 calls made as recorded (outcome scored)") {
		e.dumpLogs()
		var rec runs.Result
		e.starterJSON(&rec, "result", src, "--json")
		t.Fatalf("replay-calls (exit %d): %s %s\nthe recorded run's attempts: %+v", code, out, errs, rec.AttemptLog)
	}
	out, errs, code = e.starter("replay-calls", src, "--seed", "2")
	if code != 1 || !strings.Contains(out, "FAIL after 1 of 4 calls: replay: call 2 of 4 (run "+src+", attempt 1, seq ") || !strings.Contains(out, "the request differs from the recorded one at $.messages[3].content: recorded \"exit 0") {
		t.Fatalf("replay-calls with another seed (exit %d): %s %s", code, out, errs)
	}
	if n := len(script.Served()); n != served {
		t.Fatalf("the replays reached the provider %d times", n-served)
	}
	t.Logf("replay of another seed: %s", strings.TrimSpace(out))
}

// provider is a scripted model served to the worker's gateway as both
// providers, with the keys the gateway sends it in an agent.env_file.
type provider struct{ url, envFile string }

func scriptedProvider(t *testing.T, script *llmfake.Script) provider {
	t.Helper()
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
	return provider{url: up, envFile: envFile}
}

// vars are the worker's settings for the provider, then more.
func (p provider) vars(more ...string) []string {
	return append([]string{"MLRB_AGENT_ENV_FILE=" + p.envFile, "MLRB_GATEWAY_OPENAI_URL=" + p.url + "/v1", "MLRB_GATEWAY_ANTHROPIC_URL=" + p.url}, more...)
}

// served records which turns each task's conversation was answered, in
// order.
type served struct {
	mu  sync.Mutex
	pos map[string][]int
}

func (s *served) add(task string, pos int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos[task] = append(s.pos[task], pos)
}

func (s *served) of(task string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pos[task])
}

// TestResearcherResumesAfterWorkerKill: the worker SIGKILLed while the
// LLM agent (its image, in a container) is mid-conversation: one run
// between a tool call and its result, one waiting on a long background
// job. Each run resumes from its checkpoint with the same conversation:
// the first request of the resumed attempt carries the earlier turns,
// the worker's resume note and what the crash cut off, and no turn the
// checkpoint held an answer to is asked for again.
func TestResearcherResumesAfterWorkerKill(t *testing.T) {
	parallel(t)
	train := "mlrb train"
	resumed := []string{"This is attempt 2, resumed", "The worker's resume note: attempt 2 after attempt 1 (lost)", "Restored checkpoint #"}
	scripts := map[string][]llmfake.Turn{
		"e2e_rcrash_call": {
			{Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": train + " --out output/model"}}}},
			{Want: []string{"saved=output/model"}, Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": "sleep 120"}}}},
			{Want: append(slices.Clone(resumed), "saved=output/model", "your call call_1_0 (shell) was interrupted"),
				Calls: []llmfake.ToolCall{{Name: "submit", Args: map[string]any{"model_dir": "output/model", "done": true}}}},
		},
		"e2e_rcrash_job": {
			{Calls: []llmfake.ToolCall{{Name: "job_start", Args: map[string]any{"command": train + " --out output/model; echo epoch-1; sleep 120"}}}},
			{Want: []string{"started job-1"}, Calls: []llmfake.ToolCall{{Name: "job_check", Args: map[string]any{"id": "job-1", "wait_s": 300}}}},
			{Want: append(slices.Clone(resumed), "job job-1 was running and is gone"),
				Calls: []llmfake.ToolCall{{Name: "read_file", Args: map[string]any{"path": ".researcher/jobs/job-1.log"}}}},
			{Want: []string{"epoch-1"}, Calls: []llmfake.ToolCall{{Name: "submit", Args: map[string]any{"model_dir": "output/model", "done": true}}}},
		},
	}
	log := &served{pos: map[string][]int{}}
	script := &llmfake.Script{Next: func(pos int, body []byte) (llmfake.Turn, error) {
		texts := llmfake.Texts(body)
		for task, turns := range scripts {
			if strings.Contains(texts, "The task ("+task+")") && pos < len(turns) {
				log.add(task, pos)
				return turns[pos], nil
			}
		}
		return llmfake.Turn{}, os.ErrNotExist
	}}
	provider := scriptedProvider(t, script)
	dir := agentDefs(t, map[string]string{
		"rb-openai":    "image: " + researcherImage + "\nprovider: openai\nmodel: gpt-4o\nargs: [/mlrb, researcher]\nllm_budget_usd: 2\n",
		"rb-anthropic": "image: " + researcherImage + "\nprovider: anthropic\nmodel: claude-sonnet-4-20250514\nargs: [/mlrb, researcher]\nllm_budget_usd: 2\n",
	})
	buildBusyboxImage(t, researcherImage, "researcher.Dockerfile")
	e := dockerEnv(t, provider.vars("MLRB_AGENTS_DIR="+dir, "MLRB_CHECKPOINT_INTERVAL="+interval.String(), "MLRB_AGENT_HEARTBEAT_TIMEOUT="+hbTimeout.String(), "MLRB_AGENT_GRACE=2s")...)
	for task := range scripts {
		e.addTask(task, "mini_baby_lm", nil)
	}
	w := e.start("worker", "--dev")
	e.waitServer()
	ids := map[string]string{
		"e2e_rcrash_call": e.startRun("--task", "e2e_rcrash_call", "--agent", "rb-openai", "--seed", "1", "--time-limit", "4m"),
		"e2e_rcrash_job":  e.startRun("--task", "e2e_rcrash_job", "--agent", "rb-anthropic", "--seed", "1", "--time-limit", "4m"),
	}
	// The crash comes once both are at their second turn and a checkpoint
	// has been taken since: the checkpoint holds the call in flight.
	for task, id := range ids {
		for deadline := time.Now().Add(2 * time.Minute); !slices.Contains(log.of(task), 1); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				e.dumpLogs()
				t.Fatalf("%s never reached its second turn (served %v; script: %v)", task, log.of(task), script.Err())
			}
		}
		st := e.waitCheckpoints(id, 1)
		e.waitCheckpoints(id, st.Checkpoints+1)
	}
	w.kill(t)
	e.start("worker", "--dev")
	e.waitServer()
	for task, id := range ids {
		var res result
		e.starterJSON(&res, "result", id, "--wait", "--json")
		if res.Outcome != "scored" || res.Attempts != 2 {
			e.dumpLogs()
			t.Fatalf("%s: %+v (script: %v)", id, res, script.Err())
		}
		got := log.of(task)
		if want := len(scripts[task]); !slices.Equal(got, seq(want)) {
			t.Fatalf("%s: turns served %v, want each of %d once: a call made before the checkpoint was made again", id, got, want)
		}
		var full runs.Result
		e.starterJSON(&full, "result", id, "--json")
		t.Logf("%s: lost %.1f s of agent time to the crash, %d LLM calls in all ($%.4f), none made again", id, res.Budget.LostS, full.Cost.LLM.Calls, full.Cost.LLM.USD)
	}
	if err := script.Err(); err != nil {
		t.Fatal(err)
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
