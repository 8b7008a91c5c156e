package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

const (
	interval  = 2 * time.Second
	hbTimeout = 4 * time.Second
)

// crashTask lasts about 12 s of agent time: 15 trials paced 0.8 s.
func crashEnv(t *testing.T, hb time.Duration) *env {
	e := newEnv(t,
		"MLRB_CHECKPOINT_INTERVAL="+interval.String(),
		"MLRB_AGENT_HEARTBEAT_TIMEOUT="+hb.String(),
		"MLRB_AGENT_GRACE=2s",
	)
	e.addTask("e2e_crash", "mini_baby_lm", map[string]string{"trials: 24": "trials: 15", "trial_seconds: 0.4": "trial_seconds: 0.8"})
	return e
}

// TestWorkerKilledMidRun: SIGKILL the worker (and with it the embedded
// server) after the second checkpoint; a restarted worker on the same state
// dir resumes the run from its last checkpoint.
func TestWorkerKilledMidRun(t *testing.T) {
	parallel(t)
	e := crashEnv(t, hbTimeout)
	w := e.start("worker", "--dev")
	e.waitServer()
	runID := e.startRun("--task", "e2e_crash", "--agent", "reference", "--seed", "5", "--time-limit", "25s")
	st := e.waitCheckpoints(runID, 2)
	if st.Phase != string(runs.PhaseRunning) || st.Attempt != 1 {
		t.Fatalf("before the crash: %+v", st)
	}
	// Let the agent work past the checkpoint: that work is what gets lost.
	time.Sleep(1200 * time.Millisecond)
	pids := e.agentPIDs()
	if len(pids) != 1 {
		t.Fatalf("want one agent process before the crash, got %v", pids)
	}
	// The agent runs from mlrb-agent beside the worker, as `task build`
	// lays them out.
	if exe, want := e.agentExe(), realPath(t, filepath.Join(bin, "mlrb-agent")); exe != want {
		t.Fatalf("the agent runs %s, not %s", exe, want)
	}
	w.kill(t)
	// The agent dies with its worker (parent-death signal).
	deadline := time.Now().Add(5 * time.Second)
	for alive(pids[0]) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pids[0]) {
		t.Fatalf("agent %d outlived its killed worker", pids[0])
	}

	e.start("worker", "--dev")
	e.waitServer()
	var res result
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Score == nil || res.Attempts != 2 {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
	maxLost := (interval + hbTimeout).Seconds()
	if res.Budget.LostS < 0 || res.Budget.LostS > maxLost {
		e.dumpLogs()
		t.Fatalf("lost %.2fs, want in [0, %.0f]", res.Budget.LostS, maxLost)
	}
	if res.Budget.UsedS > res.Budget.GrantedS || res.Budget.InfraWaitS <= 0 {
		t.Fatalf("budget = %+v", res.Budget)
	}
	t.Logf("budget %+v, checkpoints %d, score %.4f", res.Budget, res.Checkpoints, *res.Score)

	// The second agent process saw MLRB_RESUMED=1 and the restored trials;
	// the agent started exactly twice.
	starts := readStarts(t, e, runID)
	if len(starts) != 2 || starts[0] != "attempt=1 resumed=0 trials_found=0" {
		t.Fatalf("starts = %q", starts)
	}
	m := regexp.MustCompile(`^attempt=2 resumed=1 trials_found=(\d+)$`).FindStringSubmatch(starts[1])
	if m == nil {
		t.Fatalf("second start = %q", starts[1])
	}
	if n, _ := strconv.Atoi(m[1]); n < 2 {
		t.Fatalf("second start found %d trials, want the ones from before the crash", n)
	}
	// The resumed attempt was told what was lost: the checkpoint it got,
	// the attempt before it lost with its worker, and its agent running.
	logs, _, _ := e.starter("logs", runID)
	note := regexp.MustCompile(`resume note: attempt 2 after attempt 1 \(lost\), checkpoint #\d+ at [\d.]+ s of agent time, ([\d.]+) s lost past it, down [\d.]+ s, ([1-9]\d*) process\(es\) were running`).FindStringSubmatch(logs)
	if note == nil {
		t.Fatalf("the resumed attempt's log holds no resume note naming what was lost:\n%s", logs)
	}
	// A checkpoint may land just before the kill: nothing lost is a
	// right note too.
	if lost, _ := strconv.ParseFloat(note[1], 64); lost < 0 || lost > maxLost {
		t.Fatalf("the note says %.1f s were lost past the checkpoint, want in [0, %.0f]", lost, maxLost)
	}
	replayHistory(t, e, runID, "lease_here_worker_killed.json")
}

// TestServerKilledMidRun: the embedded server runs alone and the worker
// apart; killing and restarting the server costs the agent nothing.
func TestServerKilledMidRun(t *testing.T) {
	parallel(t)
	e := crashEnv(t, 15*time.Second)
	srv := e.start("worker", "--dev", "--server-only")
	e.waitServer()
	e.start("worker")
	runID := e.startRun("--task", "e2e_crash", "--agent", "reference", "--seed", "9", "--time-limit", "25s")
	e.waitCheckpoints(runID, 1)
	srv.kill(t)
	time.Sleep(2 * time.Second)
	if pids := e.agentPIDs(); len(pids) != 1 {
		e.dumpLogs()
		t.Fatalf("the agent must keep running while the server is down, found %v", pids)
	}
	e.start("worker", "--dev", "--server-only")
	e.waitServer()
	var res result
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Score == nil || res.Attempts != 1 || res.Budget.LostS != 0 {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
	starts := readStarts(t, e, runID)
	if len(starts) != 1 {
		t.Fatalf("the agent started %d times, want once: %q", len(starts), starts)
	}
	t.Logf("budget %+v, checkpoints %d", res.Budget, res.Checkpoints)
	replayHistory(t, e, runID, "server_killed.json")
}

// TestWorkerStoppedGracefully: a worker stopped with SIGTERM (a deploy)
// stops its agent, checkpoints it and hands the attempt back: after the
// restart the run resumes with nothing lost, where a SIGKILL loses the work
// since the last checkpoint.
func TestWorkerStoppedGracefully(t *testing.T) {
	parallel(t)
	e := crashEnv(t, hbTimeout)
	e.start("worker", "--dev", "--server-only")
	e.waitServer()
	w := e.start("worker")
	runID := e.startRun("--task", "e2e_crash", "--agent", "reference", "--seed", "6", "--time-limit", "25s")
	e.waitCheckpoints(runID, 2)
	time.Sleep(1200 * time.Millisecond) // work past the checkpoint
	w.stop(t, 30*time.Second)
	if pids := e.agentPIDs(); len(pids) != 0 {
		t.Fatalf("agents outlived their stopped worker: %v", pids)
	}
	e.start("worker")
	var res result
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Attempts != 2 || res.Budget.LostS != 0 {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
	// The hand-back reached a live worker: a workflow task stranded on the
	// stopping one would have waited out its 10 s timeout.
	if res.Budget.InfraWaitS >= 8 {
		t.Fatalf("infra wait %.1fs: the hand-back waited for a timeout", res.Budget.InfraWaitS)
	}
	starts := readStarts(t, e, runID)
	m := regexp.MustCompile(`^attempt=2 resumed=1 trials_found=(\d+)$`).FindStringSubmatch(starts[len(starts)-1])
	if len(starts) != 2 || m == nil {
		t.Fatalf("starts = %q", starts)
	}
	t.Logf("budget %+v, checkpoints %d, second start %q", res.Budget, res.Checkpoints, starts[1])
	replayHistory(t, e, runID, "handed_back.json")
}

// readStarts reads the agent's starts.log from the run's latest
// checkpoint: an attempt's own files are gone once it ended.
func readStarts(t *testing.T, e *env, runID string) []string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	if _, errs, code := e.starter("checkpoint", "restore", runID, dir); code != 0 {
		t.Fatalf("restore %s: exit %d: %s", runID, code, errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "starts.log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// replayHistory replays the run's recorded history against the current
// workflow code; with MLRB_RECORD_HISTORY=1 it also stores it as a fixture
// for the workflows package's replay test.
func replayHistory(t *testing.T, e *env, runID, name string) {
	t.Helper()
	replayExecution(t, e, runID, "", name)
}

// replayExecution is replayHistory for one execution (execution "" is
// the latest) of a workflow that continues as new. The history is
// exported by the official temporal CLI (`workflow show --output json`),
// as an operator would export a live run's; a recording needs it, and so
// does CI; elsewhere, without it, the SDK exports the same history.
func replayExecution(t *testing.T, e *env, id, execution, name string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	recording := os.Getenv("MLRB_RECORD_HISTORY") == "1"
	if recording {
		file = filepath.Join(repoRoot(t), "workflows", "testdata", name)
	}
	var b []byte
	if testenv.Find("temporal") != "" || recording || os.Getenv("CI") != "" {
		b = e.exportHistory(testenv.Tool(t, "temporal", installTemporal), id, execution)
	} else {
		var err error
		if b, err = protojson.Marshal(e.historyOf(id, execution)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file+".id", []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := e.starter("replay", file); code != 0 || !strings.Contains(out, "ok    "+file) {
		t.Fatalf("starter replay %s: exit %d\n%s%s", file, code, out, errs)
	}
}

// TestForkFromACheckpoint: a finished run's second checkpoint starts a new
// run that resumes from it (the agent finds the trials saved by then).
func TestForkFromACheckpoint(t *testing.T) {
	parallel(t)
	e := crashEnv(t, hbTimeout)
	e.start("worker", "--dev")
	e.waitServer()
	var src result
	e.starterJSON(&src, "run", "--task", "e2e_crash", "--seed", "3", "--time-limit", "25s", "--wait", "--json")
	if src.Outcome != "scored" || src.Checkpoints < 3 {
		t.Fatalf("source run = %+v", src)
	}
	// Retention keeps the last few: fork from the oldest one kept.
	var kept []struct {
		Seq   int  `json:"seq"`
		Final bool `json:"final"`
	}
	e.starterJSON(&kept, "checkpoint", "list", src.RunID, "--json")
	if len(kept) < 2 || kept[0].Final {
		t.Fatalf("checkpoints kept: %+v", kept)
	}
	var fork result
	e.starterJSON(&fork, "fork", src.RunID, "--from-checkpoint", strconv.Itoa(kept[0].Seq), "--id", "fork-1", "--wait", "--json")
	if fork.Outcome != "scored" || fork.Task != "e2e_crash" || fork.Seed != 3 || fork.Budget.UsedS < 2 {
		t.Fatalf("fork = %+v", fork)
	}
	replayHistory(t, e, "fork-1", "fork.json")
	starts := readStarts(t, e, "fork-1")
	if len(starts) != 2 || !strings.HasPrefix(starts[1], "attempt=1 resumed=1 trials_found=") || strings.HasSuffix(starts[1], "trials_found=0") {
		t.Fatalf("fork's starts = %q", starts)
	}
	if _, errs, code := e.starter("fork", src.RunID, "--from-checkpoint", "99"); code != 2 || !strings.Contains(errs, "--from-checkpoint") {
		t.Fatalf("fork from a missing checkpoint: exit %d %s", code, errs)
	}
}

// TestExtendAndCancel: an extension moves the running agent's deadline; a
// cancel stops it gracefully with a final checkpoint; both are updates
// and so audited in the run's history.
func TestExtendAndCancel(t *testing.T) {
	parallel(t)
	e := newEnv(t, "MLRB_CHECKPOINT_INTERVAL=2s", "MLRB_AGENT_GRACE=2s")
	e.addTask("e2e_long", "mini_baby_lm", map[string]string{"trials: 24": "trials: 60", "trial_seconds: 0.4": "trial_seconds: 1"})
	e.start("worker", "--dev")
	e.waitServer()
	runID := e.startRun("--task", "e2e_long", "--seed", "1", "--time-limit", "30s")
	e.waitCheckpoints(runID, 1)
	if out, errs, code := e.starter("extend", runID, "--by", "1h"); code != 0 || !strings.Contains(out, "granted 3630s") {
		t.Fatalf("extend (exit %d): %s %s", code, out, errs)
	}
	if _, errs, code := e.starter("cancel", runID); code != 0 {
		t.Fatalf("cancel: %s", errs)
	}
	var res result
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	replayHistory(t, e, runID, "extended_canceled.json")
	if res.Outcome != "canceled" || res.Score != nil || res.Budget.GrantedS != 3630 || res.Checkpoints < 2 {
		t.Fatalf("result = %+v", res)
	}
	if _, errs, code := e.starter("extend", runID, "--by", "1h"); code != 2 || !strings.Contains(errs, "has ended (completed)") {
		t.Fatalf("extending a finished run: exit %d %s", code, errs)
	}
}

// TestExtensionReachesTheAgent: an extension rewrites the agent's deadline
// file, so an agent that would stop at its first deadline keeps working
// and finishes its search on its own; in a container too, where the file
// comes through a read-only mount of its directory.
func TestExtensionReachesTheAgent(t *testing.T) {
	parallel(t)
	vars := []string{"MLRB_CHECKPOINT_INTERVAL=2s", "MLRB_AGENT_GRACE=2s"}
	for _, runtime := range []string{"process", "docker"} {
		t.Run(runtime, func(t *testing.T) {
			e := newEnv(t, vars...)
			if runtime == "docker" {
				e = dockerEnv(t, vars...)
			}
			extensionReachesTheAgent(t, e)
		})
	}
}

func extensionReachesTheAgent(t *testing.T, e *env) {
	// 19 s of work (on an idle host) in a 14 s limit; the worker reads
	// the run's controls every 5 s, so an extension sent after the first
	// checkpoint (2 s) is seen well before the soft deadline (12 s). It
	// is a minute, so the work ends before the new deadline however
	// loaded the host.
	e.addTask("e2e_ext", "mini_baby_lm", map[string]string{"trial_seconds: 0.4": "trial_seconds: 0.8"})
	e.start("worker", "--dev")
	e.waitServer()
	runID := e.startRun("--task", "e2e_ext", "--seed", "1", "--time-limit", "14s")
	e.waitCheckpoints(runID, 1)
	if _, errs, code := e.starter("extend", runID, "--by", "60s"); code != 0 {
		t.Fatalf("extend: %s", errs)
	}
	// Watched live to its end: the budget bar counts down from the
	// extended grant, and the result follows.
	watch, errs, code := e.starter("watch", runID, "--refresh", "1s")
	if code != 0 || !strings.Contains(watch, "left of 74s") || !strings.Contains(watch, "last checkpoint") || !strings.Contains(watch, "outcome    scored") {
		t.Fatalf("watch (exit %d): %s\n%s", code, errs, watch)
	}
	var res result
	e.starterJSON(&res, "result", runID, "--json")
	if res.Outcome != "scored" || res.Budget.GrantedS != 74 || res.Budget.UsedS <= 14 {
		t.Fatalf("the agent must finish past its first deadline: %+v", res)
	}
}
