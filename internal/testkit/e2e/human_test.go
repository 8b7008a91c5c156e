package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/results/report"
	"github.com/mlrb/mlrb/internal/sandbox/attach"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
)

const humanImage = "mlrb-human:e2e"

// buildHumanImage builds the person's shell image from
// deploy/human.Dockerfile, as an operator would: Debian's static busybox
// and mlrb's static helper, nothing pulled.
func buildHumanImage(t *testing.T) { buildBusyboxImage(t, humanImage, "human.Dockerfile") }

// buildBusyboxImage builds an image of deploy/ whose context is Debian's
// static busybox and mlrb's static binary, as an operator would.
func buildBusyboxImage(t *testing.T, tag, dockerfile string) {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("busybox (Debian's busybox-static) is needed for %s", dockerfile)
		}
		t.Skip("no busybox: apt-get install busybox-static")
	}
	df, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", dockerfile))
	if err != nil {
		t.Fatal(err)
	}
	agent := staticBinary(t, "cmd/mlrb-agent")
	d := docker(t)
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, ok := built[tag]; ok {
		return
	}
	if err := runtime.BuildImage(context.Background(), d, tag, map[string]string{"busybox": bb, "mlrb": agent}, string(df)); err != nil {
		t.Fatal(err)
	}
	built[tag] = ""
}

// terminal is a person's terminal: a tmux session of its own, typed into
// and read as a person would.
type terminal struct {
	t      *testing.T
	e      *env
	socket string
}

// attachIn opens `starter attach CREDENTIAL` in a new tmux terminal.
func (e *env) attachIn(cred string) *terminal {
	e.t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			e.t.Fatal("tmux is needed to drive a person's terminal")
		}
		e.t.Skip("no tmux")
	}
	tm := &terminal{t: e.t, e: e, socket: filepath.Join(e.t.TempDir(), "tmux")}
	cmd := "env " + strings.Join(e.vars, " ") + " " + filepath.Join(bin, "starter") + " attach " + cred + "; echo '[the attach command ended]'; sleep 3600"
	if out, err := exec.Command("tmux", "-S", tm.socket, "new-session", "-d", "-x", "150", "-y", "50", cmd).CombinedOutput(); err != nil {
		e.t.Fatalf("tmux: %v %s", err, out)
	}
	e.t.Cleanup(func() { _ = exec.Command("tmux", "-S", tm.socket, "kill-server").Run() })
	return tm
}

// screen is what the terminal shows, with its scrollback.
func (tm *terminal) screen() string {
	out, _ := exec.Command("tmux", "-S", tm.socket, "capture-pane", "-p", "-S", "-500").CombinedOutput()
	return string(out)
}

// typeLine types a line and Enter.
func (tm *terminal) typeLine(line string) {
	tm.t.Helper()
	if out, err := exec.Command("tmux", "-S", tm.socket, "send-keys", "-l", line).CombinedOutput(); err != nil {
		tm.t.Fatalf("send-keys: %v %s", err, out)
	}
	if out, err := exec.Command("tmux", "-S", tm.socket, "send-keys", "Enter").CombinedOutput(); err != nil {
		tm.t.Fatalf("send-keys: %v %s", err, out)
	}
}

// waitFor waits until the terminal shows want (count times in all).
func (tm *terminal) waitFor(want string, count int, within time.Duration) {
	tm.t.Helper()
	eventually(tm.t, tm.e, within, func() string {
		if s := tm.screen(); strings.Count(s, want) < count {
			return "the terminal does not show " + want + " (" + time.Now().Format(time.TimeOnly) + "):\n" + s
		}
		return ""
	})
}

// runPhase is a run's phase as its status says it.
func (e *env) runPhase(runID string) string {
	var st struct {
		Phase string `json:"phase"`
	}
	out, _, code := e.starter("status", runID, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		return ""
	}
	return st.Phase
}

// TestHumanBaseline: a person, driven through tmux, attaches to a
// mini_baby_lm run, starts the clock, trains a model with the image's
// tools, pauses past human.release_after (the lease is released and
// another run takes the one slot), starts again on a new lease from the
// checkpoint, and submits; the run is scored, its ledger shows agent time
// without the pauses, and the recording replays. Credentials open their
// own run only, and nothing after it ended; an unassisted person's
// container reaches no LLM API.
func TestHumanBaseline(t *testing.T) {
	parallel(t)
	buildHumanImage(t)
	dir := agentDefs(t, map[string]string{"person": "human: true\nimage: " + humanImage + "\n"})
	e := dockerEnv(t, "MLRB_AGENTS_DIR="+dir, "MLRB_CHECKPOINT_INTERVAL=3s", "MLRB_HUMAN_RELEASE_AFTER=8s", "MLRB_HOST_MAX_AGENTS=1")
	e.start("worker", "--dev")
	e.waitServer()

	began := time.Now()
	runID := e.startRun("--task", "mini_baby_lm", "--agent", "person", "--seed", "1", "--time-limit", "10m")
	other := e.startRun("--task", "mini_baby_lm", "--agent", "person", "--seed", "2", "--time-limit", "10m")
	eventually(t, e, time.Minute, func() string {
		if p := e.runPhase(runID); p != "awaiting_person" {
			return "the person's run is " + p + ", not awaiting_person"
		}
		return ""
	})
	if out, _, _ := e.starter("status", runID); !strings.Contains(out, "for its person (no GPU held") || !strings.Contains(out, "starter invite "+runID) {
		t.Fatalf("the status of a run waiting for its person says nothing of it:\n%s", out)
	}
	var inv, otherInv struct{ Credential string }
	e.starterJSON(&inv, "invite", runID, "--label", "alice", "--json")
	e.starterJSON(&otherInv, "invite", other, "--label", "bob", "--json")

	// Bob's credential does not open Alice's run.
	mine, _ := attach.ParseCredential(inv.Credential)
	theirs, _ := attach.ParseCredential(otherInv.Credential)
	forged := attach.Credential{Run: mine.Run, Token: theirs.Token, Via: mine.Via}
	if out, errs, code := e.starter("attach", forged.String()); code != 0 || !strings.Contains(out, "refused") {
		t.Fatalf("another run's credential (exit %d): %s %s", code, out, errs)
	}

	tm := e.attachIn(inv.Credential)
	tm.waitFor("paused>", 1, time.Minute)
	tm.typeLine("task start")
	tm.waitFor("your clock runs", 1, 2*time.Minute)
	// An unassisted person's door serves their clock, never an LLM API.
	tm.typeLine("wget -q -O- --post-data '{}' http://127.0.0.1:3128/v1/chat/completions; echo llm-exit-$?")
	tm.waitFor("llm-exit-", 1, 30*time.Second)
	if s := tm.screen(); strings.Contains(s, "llm-exit-0") {
		t.Fatalf("an unassisted person reached an LLM API:\n%s", s)
	}
	// A second terminal on the same run: its own shell, beside the first.
	second := e.attachIn(inv.Credential)
	second.waitFor("your clock runs", 1, time.Minute)
	second.typeLine("echo second-$((6*7))")
	second.waitFor("second-42", 1, 30*time.Second)
	second.typeLine("exit")
	second.waitFor("[the attach command ended]", 1, 30*time.Second)
	tm.typeLine("mlrb reference-agent > train.log 2>&1; echo trained-$? && ls output")
	tm.waitFor("trained-0", 1, 2*time.Minute)
	tm.typeLine("task note tried the n-gram grid")
	tm.waitFor("noted", 1, 30*time.Second)
	tm.typeLine("task stop")
	tm.waitFor("paused>", 2, time.Minute)
	// Past release_after the GPU goes back: the other run takes the slot.
	eventually(t, e, 2*time.Minute, func() string {
		if p := e.runPhase(runID); p != "awaiting_person" {
			return "after the pause the run is " + p + ", not awaiting_person"
		}
		return ""
	})
	var otherTm = e.attachIn(otherInv.Credential)
	otherTm.waitFor("paused>", 1, time.Minute)
	otherTm.typeLine("task start")
	otherTm.waitFor("your clock runs", 1, 2*time.Minute)
	otherTm.typeLine("task submit")

	tm.typeLine("task start")
	tm.waitFor("your clock runs", 2, 3*time.Minute)
	tm.typeLine("ls output/model && echo restored-ok")
	tm.waitFor("restored-ok", 1, 30*time.Second)
	tm.typeLine("task submit")
	tm.waitFor("[the attach command ended]", 1, time.Minute)

	var res struct {
		result
		Budget struct {
			UsedS   float64 `json:"used_s"`
			PausedS float64 `json:"paused_s"`
		} `json:"budget"`
		AgentDef struct {
			Human string `json:"human"`
		} `json:"agent_definition"`
		Notes []struct{ Text string } `json:"notes"`
	}
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Score == nil || res.Attempts < 2 || res.AgentDef.Human != "unassisted" {
		t.Fatalf("the person's result: %+v", res)
	}
	if wall := time.Since(began).Seconds(); res.Budget.PausedS < 8 || res.Budget.UsedS+res.Budget.PausedS > wall || len(res.Notes) != 1 || res.Notes[0].Text != "tried the n-gram grid" {
		t.Fatalf("the person's ledger: used %.1fs, paused %.1fs, notes %+v", res.Budget.UsedS, res.Budget.PausedS, res.Notes)
	}
	// The recording replays.
	out, errs, code := e.starter("sessions", runID)
	if code != 0 || !strings.Contains(out, "alice") {
		t.Fatalf("sessions (exit %d): %s %s", code, out, errs)
	}
	out, _, code = e.starter("sessions", runID, "--play", "1", "--speed", "1000", "--idle", "1ms")
	if code != 0 || !strings.Contains(out, "trained-0") || !strings.Contains(out, "restored-ok") {
		t.Fatalf("the replay (exit %d) misses the session:\n%s", code, out)
	}
	// The report replays it too.
	rep := filepath.Join(t.TempDir(), "report")
	if _, errs, code := e.starter("report", runID, "-o", rep); code != 0 {
		t.Fatalf("report: %s", errs)
	}
	page, _ := os.ReadFile(filepath.Join(rep, "runs", report.Key(runID)+".html"))
	script, _ := filepath.Glob(filepath.Join(rep, "runs", report.Key(runID), "session-*.js"))
	if !strings.Contains(string(page), "a person (alice), unassisted") || !strings.Contains(string(page), "replay") || len(script) == 0 {
		t.Fatalf("the report's run page shows no replayable session (%d scripts)", len(script))
	}
	if b, _ := os.ReadFile(script[0]); !strings.Contains(string(b), "trained-0") {
		t.Fatal("the report's session misses what the person did")
	}
	replayHistory(t, e, runID, "human_released.json")
	// The credential is useless once the run ended.
	if out, errs, code := e.starter("attach", inv.Credential); code != 0 || !strings.Contains(out, "refused") {
		t.Fatalf("attach after the end (exit %d): %s %s", code, out, errs)
	}
}

// personTrains is a person's whole session on a fresh terminal: attach,
// start the clock, train with the image's tools, submit.
func (e *env) personTrains(cred string, also ...string) *terminal {
	e.t.Helper()
	tm := e.attachIn(cred)
	tm.waitFor("paused>", 1, 2*time.Minute)
	tm.typeLine("task start")
	tm.waitFor("your clock runs", 1, 3*time.Minute)
	for _, line := range also {
		tm.typeLine(line)
	}
	tm.typeLine("mlrb reference-agent > train.log 2>&1; echo trained-$?")
	tm.waitFor("trained-0", 1, 2*time.Minute)
	tm.typeLine("task submit")
	tm.waitFor("[the attach command ended]", 1, time.Minute)
	return tm
}

// TestHumansBesideAgents: people and an agent on one benchmark, one
// leaderboard: each person's run waits for them (invited in turn with
// `starter invite --benchmark`), the rows say which are people's, and the
// paired comparison takes the shared seeds. An assisted person's LLM
// calls go through the run's gateway, metered against their budget.
func TestHumansBesideAgents(t *testing.T) {
	parallel(t)
	buildHumanImage(t)
	fake := &llmfake.Fake{OpenAIKey: gwOpenAIKey, AnthropicKey: gwAnthropicKey, Words: 10}
	up, err := fake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	envFile := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY="+gwOpenAIKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := agentDefs(t, map[string]string{
		"person":   "human: true\nimage: " + humanImage + "\n",
		"assisted": "human: true\nimage: " + humanImage + "\nprovider: openai\nmodel: gpt-4o\nllm_budget_usd: 1\n",
	})
	e := dockerEnv(t, "MLRB_AGENTS_DIR="+dir, "MLRB_CHECKPOINT_INTERVAL=3s", "MLRB_AGENT_ENV_FILE="+envFile, "MLRB_GATEWAY_OPENAI_URL="+up+"/v1")
	e.start("worker", "--dev")
	e.waitServer()

	const bench = "people-and-agents"
	// One run at a time: the people's runs wait for them holding no slot.
	if _, errs, code := e.starter("benchmark", "--agents", "person,reference", "--tasks", "mini_baby_lm", "--seeds", "2", "--time-limit", "5m",
		"--concurrency", "1", "--id", bench); code != 0 {
		t.Fatalf("benchmark: %s", errs)
	}
	for _, who := range []string{"alice", "bob"} {
		var inv struct {
			RunID      string `json:"run_id"`
			Credential string
		}
		eventually(t, e, 2*time.Minute, func() string {
			out, errs, code := e.starter("invite", "--benchmark", bench, "--label", who, "--json")
			if code != 0 || json.Unmarshal([]byte(out), &inv) != nil {
				return "invite --benchmark: " + errs
			}
			return ""
		})
		e.personTrains(inv.Credential)
	}
	e.awaitBenchmark(bench)
	var board struct {
		Rows []struct {
			Agent, Human string
			Scored       int
		} `json:"rows"`
		Paired []struct {
			A, B string
			N    int
		} `json:"paired"`
	}
	e.starterJSON(&board, "results", bench, "--format", "json")
	if len(board.Rows) != 2 || len(board.Paired) != 1 || board.Paired[0].N != 2 {
		t.Fatalf("one leaderboard of a person and an agent: %+v", board)
	}
	for _, r := range board.Rows {
		if r.Scored != 2 || (r.Agent == "person") != (r.Human == "unassisted") {
			t.Fatalf("row %+v", r)
		}
	}
	if out, _, _ := e.starter("results", bench); !strings.Contains(out, "person (person, unassisted)") {
		t.Fatalf("the table does not say which row is a person's:\n%s", out)
	}

	// An assisted person's calls go through the gateway, metered.
	runID := e.startRun("--task", "mini_baby_lm", "--agent", "assisted", "--seed", "1", "--time-limit", "5m")
	var inv struct{ Credential string }
	eventually(t, e, time.Minute, func() string {
		if p := e.runPhase(runID); p != "awaiting_person" {
			return "the assisted run is " + p
		}
		return ""
	})
	e.starterJSON(&inv, "invite", runID, "--label", "carol", "--json")
	ask := `wget -Y off -q -O- --header "Authorization: Bearer $OPENAI_API_KEY" --header 'Content-Type: application/json' ` +
		`--post-data '{"model":"gpt-4o","messages":[{"role":"user","content":"which n-gram order?"}]}' $OPENAI_BASE_URL/chat/completions > answer.json; echo asked-$?`
	tm := e.personTrains(inv.Credential, ask)
	if s := tm.screen(); !strings.Contains(s, "asked-0") {
		t.Fatalf("the assisted person's call:\n%s", s)
	}
	var res struct {
		result
		Cost struct {
			LLM *struct {
				Calls int64   `json:"calls"`
				USD   float64 `json:"usd"`
			} `json:"llm"`
		} `json:"cost"`
		AgentDef struct {
			Human string `json:"human"`
		} `json:"agent_definition"`
	}
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Cost.LLM == nil || res.Cost.LLM.Calls != 1 || res.Cost.LLM.USD <= 0 || !strings.HasPrefix(res.AgentDef.Human, "assisted: openai gpt-4o") {
		t.Fatalf("the assisted person's result: %+v, LLM %+v", res, res.Cost.LLM)
	}
}
