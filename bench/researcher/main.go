// Command researcher measures mlrb's LLM research agent over a
// 24-hour-shaped conversation: thousands of turns of long tool outputs
// from a scripted model (internal/testkit/llmfake), with the compactions
// they force. It runs the agent as the worker does, a child process
// (this binary again, `researcher`) under the agent contract, and prints
// the agent's peak resident memory, the state it writes per step, and
// the largest request against the model's window; it exits 1 past 256 MiB
// or over the window.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mlrb/mlrb/internal/process/agentcmd"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
)

const key = "sk-bench-researcher"

// figures are what the scripted model saw of the conversation.
type figures struct {
	mu                      sync.Mutex
	turns, summaries        int
	maxTokens, summaryToken int
	maxState, sumState      int64
	stateSamples            int
}

func main() {
	if agentcmd.RunIfAgent() {
		return
	}
	turns := flag.Int("turns", 3000, "tool turns before the model submits")
	outKB := flag.Int("output-kb", 32, "each tool call's output, KiB")
	window := flag.Int("window", 128000, "the model's context window, tokens (gpt-4o's)")
	flag.Parse()
	work, err := os.MkdirTemp("", "bench-researcher-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(work)
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	f := &figures{}
	state := filepath.Join(work, ".researcher", "state.json")
	script := &llmfake.Script{Next: f.next(state, self, *turns, *outKB)}
	fake := &llmfake.Fake{OpenAIKey: key, Script: script}
	up, err := fake.Start()
	if err != nil {
		fail(err)
	}
	defer fake.Close()
	rss, wall, err := runAgent(self, work, up, *window)
	if err != nil {
		fail(fmt.Errorf("the agent: %w (script: %v)", err, script.Err()))
	}
	if err := script.Err(); err != nil {
		fail(err)
	}
	report(f, rss, wall, *window)
}

// next is the scripted model: a training run first, then tool calls that
// print outKB each, a summary whenever asked, and the submission.
func (f *figures) next(state, self string, turns, outKB int) func(int, []byte) (llmfake.Turn, error) {
	long := fmt.Sprintf("yes 'step 000123 loss 2.3456 lr 3e-4 tokens/s 81234' | head -c %d", outKB<<10)
	return func(_ int, body []byte) (llmfake.Turn, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		tokens := len(body)/4 + 1 // the fake's reported usage
		f.maxTokens = max(f.maxTokens, tokens)
		if st, err := os.Stat(state); err == nil {
			f.maxState = max(f.maxState, st.Size())
			f.sumState += st.Size()
			f.stateSamples++
		}
		if strings.Contains(llmfake.Texts(body), "will be cut. Write a summary") {
			f.summaries++
			f.summaryToken = max(f.summaryToken, tokens)
			return llmfake.Turn{Text: "Summary: " + strings.Repeat("tried order 3 with lambda 0.8, validation 41.2; ", 60)}, nil
		}
		f.turns++
		switch {
		case f.turns == 1:
			return llmfake.Turn{Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": self + " train --out output/model"}}}}, nil
		case f.turns > turns:
			return llmfake.Turn{Calls: []llmfake.ToolCall{{Name: "submit", Args: map[string]any{"model_dir": "output/model", "done": true}}}}, nil
		}
		return llmfake.Turn{Text: "Next epoch.", Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": long}}}}, nil
	}
}

// runAgent runs the agent to its end, returning its peak RSS in bytes.
func runAgent(self, work, up string, window int) (int64, time.Duration, error) {
	prompt := filepath.Join(work, "..", filepath.Base(work)+".prompt")
	if err := os.WriteFile(prompt, []byte("Train the best small language model you can."), 0o644); err != nil {
		return 0, 0, err
	}
	defer os.Remove(prompt)
	cmd := exec.Command(self, "researcher")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "MLRB_TASK=mini_baby_lm", "MLRB_SEED=1", "MLRB_WORKDIR="+work, "MLRB_OUTPUT_DIR="+work+"/output",
		"MLRB_DEADLINE="+time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339Nano), "MLRB_ATTEMPT=1", "MLRB_PROMPT_FILE="+prompt,
		"PROVIDER=openai", "MLRB_MODEL=gpt-4o", "OPENAI_API_KEY="+key, "OPENAI_BASE_URL="+up+"/v1",
		"RESEARCHER_CONTEXT_WINDOW="+strconv.Itoa(window))
	out, err := os.Create(filepath.Join(work, "..", filepath.Base(work)+".log"))
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if err != nil {
		b, _ := os.ReadFile(out.Name())
		return 0, wall, fmt.Errorf("%w: %s", err, tail(string(b)))
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return ru.Maxrss << 10, wall, nil
}

func report(f *figures, rss int64, wall time.Duration, window int) {
	fmt.Printf("conversation: %d tool turns, %d compactions, %s (%.1f turns/s)\n", f.turns, f.summaries, wall.Round(time.Millisecond), float64(f.turns)/wall.Seconds())
	fmt.Printf("agent peak RSS: %.1f MiB (target <= 256)\n", float64(rss)/(1<<20))
	if f.stateSamples > 0 {
		fmt.Printf("state written per step: mean %.1f KiB, max %.1f KiB (the whole file, replaced atomically after the reply and after each tool result)\n",
			float64(f.sumState)/float64(f.stateSamples)/1024, float64(f.maxState)/1024)
	}
	fmt.Printf("largest request: %d tokens of a %d window (%.0f%%); largest summary request %d tokens\n", f.maxTokens, window, 100*float64(f.maxTokens)/float64(window), f.summaryToken)
	if rss > 256<<20 || f.maxTokens > window {
		fmt.Println("FAIL: past 256 MiB or over the window")
		os.Exit(1)
	}
}

func tail(s string) string { return s[max(0, len(s)-2000):] }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/researcher:", err)
	os.Exit(1)
}
