package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"

	"github.com/chromedp/chromedp"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

const (
	gwOpenAIKey    = "sk-e2e-gateway-OPENAI-41f0"
	gwAnthropicKey = "sk-ant-e2e-gateway-9b2c"
)

// TestAgentCallsThroughTheGateway: an agent container whose research is
// LLM calls (the official SDKs, MLRB's variable names) makes plain and
// streamed calls through OpenAI's chat completions and Responses and
// Anthropic's messages. It sees each answer byte for byte as the provider
// sent it; the run's result and a leaderboard of it carry the measured
// calls, tokens and dollars with the price table named; `starter calls`
// lists and prints the calls; and the provider keys are in no history
// (as the official CLI exports it), log, checkpoint or blob.
func TestAgentCallsThroughTheGateway(t *testing.T) {
	parallel(t)
	fake := &llmfake.Fake{OpenAIKey: gwOpenAIKey, AnthropicKey: gwAnthropicKey, Words: 25, Keep: true}
	up, err := fake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	envFile := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY="+gwOpenAIKey+"\nANTHROPIC_API_KEY="+gwAnthropicKey+"\nHUGGINGFACE_TOKEN=hf_e2e_gw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := dockerEnv(t, "MLRB_AGENT_ENV_FILE="+envFile, "MLRB_GATEWAY_OPENAI_URL="+up+"/v1", "MLRB_GATEWAY_ANTHROPIC_URL="+up)
	buildImage(t, "mlrb-llmagent:e2e", "llmagent", staticBinary(t, "internal/testkit/e2e/testdata/llmagent"),
		"FROM scratch\nCOPY llmagent /llmagent\nCMD [\"/llmagent\"]\n")
	e.addTask("e2e_llm", "mini_baby_lm", nil)
	e.start("worker", "--dev")
	e.waitServer()
	var res runs.Result
	e.starterJSON(&res, "run", "--task", "e2e_llm", "--label", "e2e-image", "--image", "mlrb-llmagent:e2e", "--provider", "openai",
		"--llm-budget-usd", "5", "--seed", "1", "--wait", "--json")
	if res.Outcome != runs.OutcomeScored {
		e.dumpLogs()
		t.Fatalf("run: %+v", res)
	}
	l := res.Cost.LLM
	if l == nil || l.Calls != 5 || l.USD <= 0 || l.Estimated != 0 || len(l.ByModel) != 3 || res.Cost.LLMPrices == nil || res.Cost.LLMPrices.SHA256 == "" {
		t.Fatalf("measured cost %+v", res.Cost)
	}

	logs, errs, code := e.starter("logs", res.RunID)
	if code != 0 {
		t.Fatalf("starter logs: %s", errs)
	}
	got := regexp.MustCompile(`answer (\d) sha256 ([0-9a-f]{64})`).FindAllStringSubmatch(logs, -1)
	sent := fake.Sent()
	if len(got) != 5 || len(sent) != 5 {
		t.Fatalf("%d answers received, %d sent:\n%s", len(got), len(sent), logs)
	}
	for i, m := range got {
		if m[2] != fmt.Sprintf("%x", sent[i]) {
			t.Errorf("answer %d reached the agent changed", i+1)
		}
	}

	out, errs, code := e.starter("calls", res.RunID, "--json")
	if code != 0 {
		t.Fatalf("starter calls: %s", errs)
	}
	var llmCalls int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var c transcript.Call
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if c.Kind == transcript.KindLLM {
			llmCalls++
			if c.Status != 200 || c.Usage.USD <= 0 || c.LatencyMS <= 0 {
				t.Errorf("call %+v", c)
			}
		}
	}
	if llmCalls != 5 {
		t.Fatalf("starter calls lists %d LLM calls:\n%s", llmCalls, out)
	}
	table, _, _ := e.starter("calls", res.RunID)
	if !strings.Contains(table, "anthropic.messages (stream)") || !strings.Contains(table, "claude-3-5-sonnet-20241022") {
		t.Errorf("starter calls:\n%s", table)
	}
	one, errs, code := e.starter("calls", res.RunID, "--call", "1")
	if code != 0 || !strings.Contains(one, "Propose a baseline for e2e_llm") || !strings.Contains(one, `"chat.completion"`) {
		t.Errorf("starter calls --call 1 (%d %s):\n%s", code, errs, one)
	}

	var board bytes.Buffer
	if err := leaderboard.Write(&board, "table", "e2e", leaderboard.Build(leaderboard.RunsOf([]runs.Result{res}), leaderboard.Setup{})); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("5 LLM calls, %d LLM tokens, $%.2f LLM (measured at the gateway)", l.Tokens.Total(), l.USD); !strings.Contains(board.String(), want) {
		t.Errorf("leaderboard lacks %q:\n%s", want, board.String())
	}

	reportWalk(t, e, res.RunID)
	noKeys(t, e, res.RunID, logs)
}

// reportWalk opens the run's report from disk in Chromium and goes from
// the leaderboard to the run to one of its calls, then searches them.
func reportWalk(t *testing.T, e *env, runID string) {
	t.Helper()
	rep := t.TempDir()
	if out, errs, code := e.starter("report", runID, "-o", rep, "--bodies", "4096"); code != 0 {
		t.Fatalf("report (exit %d): %s %s", code, out, errs)
	}
	bctx := browser(t)
	act(t, bctx, "open the report", chromedp.Navigate("file://"+filepath.Join(rep, "index.html")))
	act(t, bctx, "open the run", chromedp.Click(chromedp.CSS("a.run")))
	act(t, bctx, "its calls", chromedp.WaitVisible(chromedp.CSS("#calls tbody tr a.call")))
	if n := act(t, bctx, "count calls", chromedp.Evaluate[int](`document.querySelectorAll("#calls tbody tr").length`)); n != 5 {
		t.Fatalf("the run page lists %d calls, want 5", n)
	}
	act(t, bctx, "open a call", chromedp.Click(chromedp.CSS(`#calls a.call[href="#call-1-1"]`)))
	act(t, bctx, "the call", chromedp.WaitVisible(chromedp.CSS("#call")))
	if d := act(t, bctx, "read the call", chromedp.Text(chromedp.CSS("#call"))); !strings.Contains(d, "Propose a baseline for e2e_llm") || !strings.Contains(d, "status 200") {
		t.Fatalf("the call's detail: %.1000s", d)
	}
	shoot(t, bctx, "report-call.png", "")
	act(t, bctx, "search", chromedp.SetValue(chromedp.CSS("#q"), "claude"))
	act(t, bctx, "search", chromedp.Click(chromedp.CSS("#search")))
	act(t, bctx, "search done", chromedp.Poll[bool](`document.getElementById("found").textContent.indexOf("matches") >= 0`))
	if n := act(t, bctx, "count matches", chromedp.Evaluate[int](`document.querySelectorAll("#calls tbody tr").length`)); n < 1 || n >= 5 {
		t.Fatalf("searching claude shows %d calls", n)
	}
}

// noKeys looks for the provider keys everywhere a run leaves anything:
// its history (as the official CLI exports it), its logs, its
// checkpoints, every blob (call bodies decompressed) and the worker's log.
func noKeys(t *testing.T, e *env, runID, logs string) {
	t.Helper()
	cli := withPayloads(e.exportHistory(testenv.Tool(t, "temporal", installTemporal), runID, ""))
	// The attempt's ledger: in its result (or, from an older worker, its
	// last usage signal).
	if !bytes.Contains(cli, []byte(`"ledger"`)) {
		t.Fatal("the history holds no LLM ledger: the export is not the run's")
	}
	leaks := map[string][]byte{"agent log": []byte(logs), "history exported by the temporal CLI": cli}
	restored := filepath.Join(t.TempDir(), "ws")
	if _, errs, code := e.starter("checkpoint", "restore", runID, restored); code != 0 {
		t.Fatalf("checkpoint restore: %s", errs)
	}
	readFiles(leaks, restored, filepath.Join(e.state, "blobs"), filepath.Join(e.state, "worker.log"))
	// Bodies are stored compressed: read them back to look inside.
	store, err := blob.NewFS(filepath.Join(e.state, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	calls, err := transcript.List(context.Background(), store, runID, 0)
	if err != nil || len(calls) == 0 {
		t.Fatalf("transcript: %d calls, %v", len(calls), err)
	}
	for _, c := range calls {
		for _, b := range []*transcript.Body{c.Request, c.Response} {
			body, err := transcript.ReadBody(context.Background(), store, runID, b)
			if err != nil {
				t.Fatal(err)
			}
			k := fmt.Sprintf("call %d's bodies", c.Seq)
			leaks[k] = append(leaks[k], body...)
		}
	}
	holdsNone(t, leaks, gwOpenAIKey, gwAnthropicKey)
}
