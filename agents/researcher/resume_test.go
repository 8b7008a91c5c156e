package researcher

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
)

// run starts an agent of attempt n on dir against the script's fake.
func agentFor(t *testing.T, dir string, attempt int) *Agent {
	env, spec := miniEnv(t, dir, attempt)
	env.Provider, env.Model = "openai", "gpt-4o"
	m, api, err := Open("openai", APIChat, "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	return &Agent{Env: env, Spec: spec, Model: m, ModelName: "gpt-4o", API: api, Log: testLog{t}, RetryWait: 10 * time.Millisecond}
}

// crashWhen runs a first attempt until cut says its saved state is where
// the crash comes, copies the work dir then (the checkpoint), and stops
// it; the copy is what a resumed attempt gets.
func crashWhen(t *testing.T, cut func(*State) bool) string {
	t.Helper()
	dir := t.TempDir()
	a := agentFor(t, dir, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := LoadState(dir); err == nil && st != nil && cut(st) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first attempt never reached the crash point")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ckpt := t.TempDir()
	if out, err := exec.Command("cp", "-a", dir+"/.", ckpt).CombinedOutput(); err != nil {
		t.Fatalf("checkpoint: %v %s", err, out)
	}
	cancel()
	<-done
	return ckpt
}

func lastCall(st *State, name string) bool {
	p := pending(st.Messages)
	return len(p) == 1 && p[0].Name == name
}

func resumeNote(t *testing.T, running ...contract.ResumedProcess) string {
	n := contract.ResumeNote{Attempt: 2, LastAttempt: 1, LastEnded: "lost", DownS: 42, LostAgentS: 7,
		Checkpoint: contract.ResumedCheckpoint{Seq: 3, Attempt: 1, AgentS: 12, At: time.Now().UTC()}, Running: running}
	b, _ := json.Marshal(n)
	p := filepath.Join(t.TempDir(), contract.ResumeFile)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResumesTheConversation: a crash between a tool call and its result,
// and one while a background job runs. The resumed attempt goes on with
// the conversation the checkpoint held; its first request carries the
// earlier turns, the call marked interrupted or the job lost, and the
// worker's resume note; no turn answered before the checkpoint is asked
// for again.
func TestResumesTheConversation(t *testing.T) {
	cases := []struct {
		name   string
		before []llmfake.Turn
		cut    string
		want   []string
	}{
		{"between-call-and-result", []llmfake.Turn{
			{Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": "echo first > a.txt && echo wrote-first"}}}},
			{Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": "sleep 60"}}}},
		}, "shell", []string{"wrote-first", "interrupted: the attempt running this call died", "your call call_1_0 (shell) was interrupted"}},
		{"during-a-job", []llmfake.Turn{
			{Calls: []llmfake.ToolCall{{Name: "job_start", Args: map[string]any{"command": "echo epoch-1; sleep 60"}}}},
			{Calls: []llmfake.ToolCall{{Name: "job_check", Args: map[string]any{"id": "job-1", "wait_s": 120}}}},
		}, "job_check", []string{"started job-1", "job job-1 was running and is gone", "echo epoch-1; sleep 60"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			after := []llmfake.Turn{
				{Want: append([]string{"This is attempt 2, resumed", "Restored checkpoint #3", "The run was down 42 s", "was running: pid 4242"}, c.want...),
					Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": makeModel}}}},
				{Want: []string{"trained"}, Calls: []llmfake.ToolCall{{Name: "submit", Args: map[string]any{"model_dir": "output/model", "done": true}}}},
			}
			s := &llmfake.Script{Turns: append(slices.Clone(c.before), after...)}
			fake(t, s)
			// The crash comes in the second turn's call (call_1_0), never
			// the first's, which may be a call of the same tool.
			ckpt := crashWhen(t, func(st *State) bool { return lastCall(st, c.cut) && pending(st.Messages)[0].ID == "call_1_0" })
			first := s.Served()
			a := agentFor(t, ckpt, 2)
			a.Env.ResumeFile = resumeNote(t, contract.ResumedProcess{PID: 4242, Command: "sleep 60"})
			if err := a.Run(context.Background()); err != nil {
				t.Fatalf("resumed: %v", err)
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if got := s.Served(); !slices.Equal(first, []int{0, 1}) || !slices.Equal(got, []int{0, 1, 2, 3}) {
				t.Fatalf("served %v before the crash and %v in all: a turn was asked for twice", first, got)
			}
			st, _ := LoadState(ckpt)
			if !slices.Equal(st.Attempts, []int{1, 2}) || st.Submitted != "output/model" {
				t.Fatalf("state: attempts %v, submitted %q", st.Attempts, st.Submitted)
			}
		})
	}
}

// TestSIGTERMSubmitsTheBestSoFar: at the soft deadline the agent stops a
// running tool and submits the model it has, at once.
func TestSIGTERMSubmitsTheBestSoFar(t *testing.T) {
	s := &llmfake.Script{Turns: []llmfake.Turn{
		{Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": makeModel}}}},
		{Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": "sleep 120"}}}},
	}}
	fake(t, s)
	dir := t.TempDir()
	a := agentFor(t, dir, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for st, _ := LoadState(dir); st == nil || !lastCall(st, "shell") || len(st.Messages) < 4; st, _ = LoadState(dir) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never reached its long call (script: %v)", s.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not stop within 10 s of SIGTERM")
	}
	var sub contract.Submission
	readJSON(t, filepath.Join(dir, "output", contract.SubmissionFile), &sub)
	if sub.ModelPath != "output/model" {
		t.Fatalf("submission %+v", sub)
	}
}

// TestBudgetRefusalEndsTheCalls: the gateway's 403 for the budget ends
// the agent's calls, not its work: the job it started runs out, the
// model it trained is submitted, and the agent exits cleanly.
func TestBudgetRefusalEndsTheCalls(t *testing.T) {
	var calls atomic.Int64
	s := &llmfake.Script{Next: func(pos int, _ []byte) (llmfake.Turn, error) {
		calls.Add(1)
		if pos == 0 {
			return llmfake.Turn{Calls: []llmfake.ToolCall{{Name: "job_start", Args: map[string]any{"command": "sleep 0.5; " + makeModel}}}}, nil
		}
		return llmfake.Turn{Status: http.StatusForbidden, Text: "the run's LLM budget of $0.01 is spent"}, nil
	}}
	fake(t, s)
	dir := t.TempDir()
	if err := agentFor(t, dir, 1).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sub contract.Submission
	readJSON(t, filepath.Join(dir, "output", contract.SubmissionFile), &sub)
	if sub.ModelPath != "output/model" || calls.Load() != 2 {
		t.Fatalf("submission %+v after %d calls; want output/model after 2 (no call after the refusal)", sub, calls.Load())
	}
}

// TestCompactsBeforeTheWindow: a long conversation of long tool outputs
// is summarised as it nears the window (by the provider's reported
// usage), goes on from the summary, and no request ever passes the
// window.
func TestCompactsBeforeTheWindow(t *testing.T) {
	const window = 24_000
	var turns atomic.Int64
	var worst atomic.Int64
	s := &llmfake.Script{Next: func(_ int, body []byte) (llmfake.Turn, error) {
		tokens := int64(len(body)/4 + 1) // what the fake reports as the request's usage
		if tokens > worst.Load() {
			worst.Store(tokens)
		}
		if tokens > window {
			return llmfake.Turn{}, errors.New("the request is past the window")
		}
		if strings.Contains(llmfake.Texts(body), summaryPrompt) {
			return llmfake.Turn{Text: "summary: trained n-grams of order 1 to 3; best so far order 2"}, nil
		}
		if n := turns.Add(1); n > 60 {
			return llmfake.Turn{Calls: []llmfake.ToolCall{{Name: "submit", Args: map[string]any{"model_dir": "output/model", "done": true}}}}, nil
		}
		return llmfake.Turn{Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": makeModel + "; yes 'epoch loss 0.123' | head -c 30000"}}}}, nil
	}}
	fake(t, s)
	dir := t.TempDir()
	a := agentFor(t, dir, 1)
	a.Window = window
	if err := a.Run(context.Background()); err != nil {
		t.Fatalf("run: %v (%v)", err, s.Err())
	}
	st, _ := LoadState(dir)
	if err := s.Err(); err != nil || st.Compactions == 0 || st.Submitted == "" {
		t.Fatalf("script %v; %d compactions, submitted %q", err, st.Compactions, st.Submitted)
	}
	t.Logf("%d turns, %d compactions, largest request %d tokens of a %d window", st.Steps, st.Compactions, worst.Load(), window)
}
