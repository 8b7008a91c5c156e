package researcher

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
	"github.com/mlrb/mlrb/tasks"
)

const key = "sk-researcher-test"

// fake serves a script to the SDKs, through the variables the gateway
// sets for an agent.
func fake(t *testing.T, s *llmfake.Script) {
	f := &llmfake.Fake{OpenAIKey: key, AnthropicKey: key, Script: s}
	up, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	t.Setenv("OPENAI_API_KEY", key)
	t.Setenv("OPENAI_BASE_URL", up+"/v1")
	t.Setenv("ANTHROPIC_API_KEY", key)
	t.Setenv("ANTHROPIC_BASE_URL", up)
}

func miniEnv(t *testing.T, dir string, attempt int) (contract.Env, *tasks.Spec) {
	c, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := c.Get("mini_baby_lm")
	if err != nil {
		t.Fatal(err)
	}
	prompt := filepath.Join(t.TempDir(), "prompt.md")
	if err := os.WriteFile(prompt, []byte("Train the best small language model you can."), 0o644); err != nil {
		t.Fatal(err)
	}
	return contract.Env{Task: spec.ID, Seed: 1, Workdir: dir, Deadline: time.Now().Add(10 * time.Minute), Attempt: attempt,
		Resumed: attempt > 1, PromptFile: prompt}, spec
}

var makeModel = "mkdir -p output/model && echo '{}' > output/model/config.json && echo '{}' > output/model/model.json && echo trained"

// TestSolvesThroughEachAPI: the agent on a scripted model, through each
// API's official SDK: tools run, a background job trains, the model is
// submitted, and every request after the first carries the tool results
// before it.
func TestSolvesThroughEachAPI(t *testing.T) {
	for _, c := range []struct{ provider, api, model string }{{"openai", APIChat, "gpt-4o"}, {"openai", APIResponses, "gpt-4o"}, {"anthropic", "", "claude-sonnet-4-5"}} {
		t.Run(c.provider+"-"+c.api, func(t *testing.T) {
			s := &llmfake.Script{Turns: []llmfake.Turn{
				{Want: []string{"Train the best small language model", "Begin. Attempt 1"}, Text: "I start with notes.",
					Calls: []llmfake.ToolCall{{Name: "write_file", Args: map[string]any{"path": "notes.md", "content": "plan: baseline\n"}}, {Name: "shell", Args: map[string]any{"command": "cat notes.md"}}}},
				{Want: []string{"wrote 15 bytes to notes.md", "plan: baseline"}, Calls: []llmfake.ToolCall{{Name: "job_start", Args: map[string]any{"command": makeModel}}}},
				{Want: []string{"started job-1"}, Calls: []llmfake.ToolCall{{Name: "job_check", Args: map[string]any{"id": "job-1", "wait_s": 30}}}},
				{Want: []string{"job-1 exited", "trained"}, Calls: []llmfake.ToolCall{{Name: "replace_in_file", Args: map[string]any{"path": "notes.md", "old": "baseline", "new": "baseline done"}}, {Name: "search_files", Args: map[string]any{"pattern": "done", "glob": "*.md"}}}},
				{Want: []string{"notes.md:1: plan: baseline done"}, Calls: []llmfake.ToolCall{{Name: "submit", Args: map[string]any{"model_dir": "output/model", "done": true}}}},
			}}
			fake(t, s)
			dir := t.TempDir()
			env, spec := miniEnv(t, dir, 1)
			env.Provider, env.Model = c.provider, c.model
			m, api, err := Open(c.provider, c.api, c.model)
			if err != nil {
				t.Fatal(err)
			}
			a := &Agent{Env: env, Spec: spec, Model: m, ModelName: c.model, API: api, Log: testLog{t}, RetryWait: 10 * time.Millisecond}
			if err := a.Run(context.Background()); err != nil {
				t.Fatalf("run: %v (script: %v)", err, s.Err())
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			var sub contract.Submission
			readJSON(t, filepath.Join(dir, "output", contract.SubmissionFile), &sub)
			var usage contract.SelfReport
			readJSON(t, filepath.Join(dir, "output", contract.UsageFile), &usage)
			if sub.ModelPath != "output/model" || usage.InputTokens == nil || *usage.InputTokens == 0 {
				t.Fatalf("submission %+v, usage %+v", sub, usage)
			}
			if got := s.Served(); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
				t.Fatalf("served %v", got)
			}
		})
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func readJSON(t *testing.T, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
