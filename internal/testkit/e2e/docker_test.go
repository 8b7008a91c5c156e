package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/scoring/reference"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

const refImage = "mlrb-reference:e2e"

var (
	buildMu sync.Mutex
	built   = map[string]string{} // package or image tag -> binary path or "" once built
)

// docker connects to the Docker daemon; without one the test skips, and
// with CI set it fails.
func docker(t *testing.T) *runtime.Docker {
	t.Helper()
	d, err := runtime.NewDocker(context.Background(), "e2e-build")
	if err != nil {
		testenv.Missing(t, err.Error())
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// staticBinary builds a package statically (CGO off) once per test binary.
func staticBinary(t *testing.T, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	p := filepath.Join(bin, filepath.Base(pkg)+"-static")
	cmd := exec.Command("go", "build", "-o", p, "github.com/mlrb/mlrb/"+pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v: %s", pkg, err, out)
	}
	built[pkg] = p
	return p
}

// buildImage builds an image once per test binary from a Dockerfile whose
// context holds one static binary under the given name.
func buildImage(t *testing.T, tag, name, binary, dockerfile string) {
	t.Helper()
	d := docker(t)
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, ok := built[tag]; ok {
		return
	}
	if err := runtime.BuildImage(context.Background(), d, tag, map[string]string{name: binary}, dockerfile); err != nil {
		t.Fatal(err)
	}
	built[tag] = ""
}

// testtaskImage is the runtime's test subject as an image whose default
// command is cmd, run as an MLRB-contract agent.
func testtaskImage(t *testing.T, tag string, cmd ...string) {
	t.Helper()
	quoted := make([]string, len(cmd))
	for i, c := range cmd {
		quoted[i] = `"` + c + `"`
	}
	buildImage(t, tag, "testtask", staticBinary(t, "internal/sandbox/runtime/testdata/testtask"),
		"FROM scratch\nCOPY testtask /testtask\nCMD [\"/testtask\", "+strings.Join(quoted, ", ")+"]\n")
}

// dockerEnv builds the reference image (a static binary, FROM scratch)
// and points the worker at the Docker runtime.
func dockerEnv(t *testing.T, vars ...string) *env {
	t.Helper()
	df, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "reference.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	buildImage(t, refImage, "mlrb", staticBinary(t, "cmd/mlrb-agent"), string(df))
	e := newEnv(t, append([]string{
		"MLRB_HOST_RUNTIME=docker",
		"MLRB_CONTAINER_AGENT_IMAGE=" + refImage,
		"MLRB_CONTAINER_EVAL_IMAGE=" + refImage,
		"MLRB_CONTAINER_MEMORY_MB=512",
	}, vars...)...)
	// Each test's containers carry its own host id.
	e.vars = append(e.vars, "MLRB_HOST_ID=e2e-"+strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	return e
}

// killAgentThenResult `docker kill`s the host's one agent container and
// waits for the run's result: scored in two attempts.
func (e *env) killAgentThenResult(host, runID string) result {
	e.t.Helper()
	ids := containers(e.t, host)
	if len(ids) != 1 {
		e.t.Fatalf("want one agent container, got %v", ids)
	}
	if out, err := exec.Command("docker", "kill", ids[0]).CombinedOutput(); err != nil {
		e.t.Fatalf("docker kill: %v %s", err, out)
	}
	var res result
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Score == nil || res.Attempts != 2 {
		e.dumpLogs()
		e.t.Fatalf("result = %+v", res)
	}
	return res
}

func containers(t *testing.T, host string) []string {
	t.Helper()
	all, doors := allContainers(t, host), allContainers(t, host, "label=io.mlrb.role=door")
	var out []string
	for _, id := range all {
		if !slices.Contains(doors, id) {
			out = append(out, id)
		}
	}
	return out
}

// allContainers lists a host's mlrb containers, agents' doors included,
// that match the filters.
func allContainers(t *testing.T, host string, filters ...string) []string {
	t.Helper()
	args := []string{"ps", "-a", "-q", "--filter", "label=io.mlrb.host=" + host}
	for _, f := range filters {
		args = append(args, "--filter", f)
	}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

// TestDockerKilledAgentResumes: the agent's container is `docker kill`ed
// mid-run; a new container resumes from the checkpoint and is scored.
func TestDockerKilledAgentResumes(t *testing.T) {
	parallel(t)
	e := dockerEnv(t, "MLRB_CHECKPOINT_INTERVAL=2s", "MLRB_AGENT_HEARTBEAT_TIMEOUT=10s", "MLRB_AGENT_GRACE=2s")
	host := "e2e-" + strings.ToLower(t.Name())
	e.addTask("e2e_docker", "mini_baby_lm", map[string]string{"trials: 24": "trials: 15", "trial_seconds: 0.4": "trial_seconds: 0.8"})
	e.start("worker", "--dev")
	e.waitServer()
	runID := e.startRun("--task", "e2e_docker", "--seed", "4", "--time-limit", "40s")
	e.waitCheckpoints(runID, 2)
	res := e.killAgentThenResult(host, runID)
	// The reference evaluator in its image is named by its scoring code,
	// as a process of any build is: the shipped anchors hold for it.
	if !strings.HasPrefix(res.AgentImage, "sha256:") || res.EvalImage != reference.Evaluator() {
		t.Fatalf("provenance: agent image %q, evaluator %q; want a digest and %q", res.AgentImage, res.EvalImage, reference.Evaluator())
	}
	t.Logf("score %.4f, budget %+v, checkpoints %d, image %s", *res.Score, res.Budget, res.Checkpoints, res.AgentImage)
	// The second container started on the restored workspace.
	logs, _, _ := e.starter("logs", runID)
	if m := regexp.MustCompile(`start attempt=2 resumed=true trials_found=(\d+)`).FindStringSubmatch(logs); m == nil || m[1] == "0" {
		t.Fatalf("the second container did not find the checkpointed trials:\n%s", logs)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(allContainers(t, host)) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if left := allContainers(t, host); len(left) != 0 {
		t.Fatalf("containers left after the run (doors included): %v", left)
	}
}

// TestDockerWorkerKilledLeavesNoOrphan: SIGKILL the worker mid-run; its
// container keeps running until the restarted worker reaps it; the run
// resumes in a new container and is scored.
func TestDockerWorkerKilledLeavesNoOrphan(t *testing.T) {
	parallel(t)
	e := dockerEnv(t, "MLRB_CHECKPOINT_INTERVAL=2s", "MLRB_AGENT_HEARTBEAT_TIMEOUT=4s", "MLRB_AGENT_GRACE=2s")
	host := "e2e-" + strings.ToLower(t.Name())
	e.addTask("e2e_docker", "mini_baby_lm", map[string]string{"trials: 24": "trials: 15", "trial_seconds: 0.4": "trial_seconds: 0.8"})
	w := e.start("worker", "--dev")
	e.waitServer()
	runID := e.startRun("--task", "e2e_docker", "--seed", "6", "--time-limit", "40s")
	e.waitCheckpoints(runID, 2)
	old := allContainers(t, host) // the agent's and its door
	w.kill(t)
	e.start("worker", "--dev")
	e.waitServer()
	// The restarted worker reaps the old attempt's container as it starts.
	survivor := func() string {
		for _, id := range allContainers(t, host) {
			for _, o := range old {
				if id == o {
					return id
				}
			}
		}
		return ""
	}
	deadline := time.Now().Add(15 * time.Second)
	for survivor() != "" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if id := survivor(); id != "" {
		t.Fatalf("container %s of the killed worker survived its restart", id)
	}
	var res result
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Attempts != 2 {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
}

func containerAgentEnv(t *testing.T, vars ...string) *env {
	e := dockerEnv(t, vars...)
	envFile := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY=sk-e2e-unused\nHUGGINGFACE_TOKEN=hf-e2e-unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.vars = append(e.vars, "MLRB_AGENT_ENV_FILE="+envFile)
	e.addTask("e2e_container", "mini_baby_lm", nil)
	e.worker = e.start("worker", "--dev")
	e.waitServer()
	return e
}

// TestDockerAgentIgnoringSIGTERM: killed at the deadline, its latest model
// is still evaluated: limit_reached with a score.
func TestDockerAgentIgnoringSIGTERM(t *testing.T) {
	parallel(t)
	testtaskImage(t, "mlrb-stubborn:e2e", "model-ignore-term")
	e := containerAgentEnv(t, "MLRB_CHECKPOINT_INTERVAL=2s", "MLRB_AGENT_GRACE=2s")
	var res result
	e.starterJSON(&res, "run", "--task", "e2e_container", "--label", "e2e-image", "--image", "mlrb-stubborn:e2e", "--provider", "openai",
		"--time-limit", "8s", "--seed", "1", "--wait", "--json")
	if res.Outcome != "limit_reached" || res.Score == nil || res.Attempts != 1 {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
	if res.Budget.UsedS < 7.5 {
		t.Fatalf("an agent ignoring SIGTERM runs to the hard deadline: used %.1fs of 8", res.Budget.UsedS)
	}
}

// TestDockerAgentOOM: an agent killed for memory ends agent_failed, with
// the reason.
func TestDockerAgentOOM(t *testing.T) {
	parallel(t)
	testtaskImage(t, "mlrb-hog:e2e", "alloc", "1024")
	e := containerAgentEnv(t, "MLRB_CONTAINER_MEMORY_MB=64")
	var res result
	e.starterJSON(&res, "run", "--task", "e2e_container", "--label", "e2e-image", "--image", "mlrb-hog:e2e", "--provider", "openai",
		"--seed", "1", "--wait", "--json")
	if res.Outcome != "agent_failed" || res.Score != nil || !strings.Contains(res.Reason, "out of memory") {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
}

// TestDockerAgentExit137IsItsOwn is audit #7: an agent that exits 137 of
// its own (no kill sent) ended its run infra_failed after being retried
// max_infra_attempts times, and a bad seed dropped out of the mean. It is
// the agent's failure, in one attempt.
func TestDockerAgentExit137IsItsOwn(t *testing.T) {
	parallel(t)
	testtaskImage(t, "mlrb-exit137:e2e", "exit", "137")
	e := containerAgentEnv(t)
	var res result
	e.starterJSON(&res, "run", "--task", "e2e_container", "--label", "e2e-image", "--image", "mlrb-exit137:e2e", "--provider", "openai",
		"--seed", "1", "--wait", "--json")
	if res.Outcome != "agent_failed" || res.Attempts != 1 || !strings.Contains(res.Reason, "exit code 137") {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
}

// TestDockerFencing: containers carrying a superseded attempt's token, or
// a run that does not exist, are removed while the live agent runs on.
func TestDockerFencing(t *testing.T) {
	parallel(t)
	buildEnvImage(t)
	e := dockerEnv(t, "MLRB_CHECKPOINT_INTERVAL=2s", "MLRB_HOST_FENCE_INTERVAL=1s")
	host := "e2e-" + strings.ToLower(t.Name())
	// The agent searches 40 s, past the 20 s the fence may take on a
	// loaded host, so that its container is still there to be spared.
	e.addTask("e2e_docker", "mini_baby_lm", map[string]string{"trials: 24": "trials: 50", "trial_seconds: 0.4": "trial_seconds: 0.8"})
	e.start("worker", "--dev")
	e.waitServer()
	runID := e.startRun("--task", "e2e_docker", "--seed", "8", "--time-limit", "70s")
	e.waitCheckpoints(runID, 1)
	live := containers(t, host)
	// Created, then started: the fence may remove one before or while it
	// starts (the worker lists created containers too), and it is then
	// gone, as wanted; docker run failed (exit 125) for that.
	fake := func(run, attempt string) string {
		out, err := exec.Command("docker", "create", "--label", "io.mlrb.managed=true", "--label", "io.mlrb.host="+host,
			"--label", "io.mlrb.run="+run, "--label", "io.mlrb.attempt="+attempt, "mlrb-envtask:e2e", "/testtask", "sleep", "120").Output()
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("docker create: %v %s", err, ee.Stderr)
		} else if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(string(out))[:12]
		if out, err := exec.Command("docker", "start", id).CombinedOutput(); err != nil && exec.Command("docker", "inspect", id).Run() == nil {
			t.Fatalf("docker start: %v %s", err, out)
		}
		return id
	}
	stale := []string{fake(runID, "0"), fake("run-that-never-was", "1")}
	deadline := time.Now().Add(20 * time.Second)
	remaining := func() []string {
		var left []string
		all := strings.Join(containers(t, host), " ")
		for _, id := range stale {
			if strings.Contains(all, id) {
				left = append(left, id)
			}
		}
		return left
	}
	for len(remaining()) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if left := remaining(); len(left) > 0 {
		e.dumpLogs()
		t.Fatalf("stale containers not fenced: %v", left)
	}
	if now := strings.Join(containers(t, host), " "); len(live) != 1 || !strings.Contains(now, live[0]) {
		t.Fatalf("the live agent's container %v must stay, containers now: %s", live, now)
	}
	var res result
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Attempts != 1 {
		t.Fatalf("result = %+v", res)
	}
}

// TestDockerMLRBLayout: an agent that leaves its model under /app/<id>/
// without reporting it still gets evaluated: the model is discovered as
// the newest Hugging Face style dir in the checkpointed paths.
func TestDockerMLRBLayout(t *testing.T) {
	parallel(t)
	testtaskImage(t, "mlrb-layout:e2e", "mlrb-layout")
	e := containerAgentEnv(t)
	var res result
	e.starterJSON(&res, "run", "--task", "e2e_container", "--label", "e2e-image", "--image", "mlrb-layout:e2e", "--provider", "openai",
		"--seed", "1", "--wait", "--json")
	if res.Outcome != "scored" || res.Score == nil {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
}

// TestRetryEvaluationInPlace: the evaluator image is broken, so the run
// waits (awaiting_evaluation_retry) instead of failing; `starter
// retry-eval --image <fixed>` scores it without running the agent again.
func TestRetryEvaluationInPlace(t *testing.T) {
	parallel(t)
	buildEnvImage(t) // has no evaluator in it: a broken evaluator image
	e := dockerEnv(t, "MLRB_CONTAINER_EVAL_IMAGE=mlrb-envtask:e2e", "MLRB_EVAL_ATTEMPTS=1", "MLRB_CHECKPOINT_INTERVAL=2s")
	e.addTask("e2e_eval", "mini_baby_lm", map[string]string{"trials: 24": "trials: 6"})
	e.start("worker", "--dev")
	e.waitServer()
	runID := e.startRun("--task", "e2e_eval", "--seed", "2")
	deadline := time.Now().Add(60 * time.Second)
	var st status
	for time.Now().Before(deadline) {
		e.starterJSON(&st, "status", runID, "--json")
		if st.Phase == "awaiting_evaluation_retry" {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if st.Phase != "awaiting_evaluation_retry" {
		e.dumpLogs()
		t.Fatalf("status = %+v", st)
	}
	// The run says why it waits and what to do; the evaluator's log is
	// kept in the store, its directory gone.
	text, _, _ := e.starter("status", runID)
	if !strings.Contains(text, "retry:     starter retry-eval "+runID) || !strings.Contains(text, "its log:   starter logs "+runID+" --evaluator") || !strings.Contains(text, "evaluator") {
		t.Fatalf("status of a waiting run:\n%s", text)
	}
	if evlog, errs, code := e.starter("logs", runID, "--evaluator"); code != 0 || !strings.Contains(evlog, "=== final-1-try-1 ===") {
		t.Fatalf("logs --evaluator (exit %d): %s\n%s", code, errs, evlog)
	}
	out, errs, code := e.starter("retry-eval", runID, "--image", refImage)
	if code != 0 || !strings.Contains(out, "scored") {
		t.Fatalf("retry-eval (exit %d): %s %s", code, out, errs)
	}
	var res struct {
		result
		Evaluations []struct {
			Image string   `json:"image"`
			Score *float64 `json:"score"`
			Error string   `json:"error"`
		} `json:"evaluations"`
	}
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	replayHistory(t, e, runID, "lease_here_evaluation_retried.json")
	if res.Outcome != "scored" || res.Score == nil || res.Attempts != 1 || len(res.Evaluations) != 2 || res.Evaluations[0].Error == "" {
		t.Fatalf("result = %+v", res)
	}
	logs, _, _ := e.starter("logs", runID)
	if n := strings.Count(logs, "start attempt="); n != 1 {
		t.Fatalf("the agent started %d times, want once", n)
	}
	// The retry's evaluation keeps its log beside the failed one's.
	if evlog, _, _ := e.starter("logs", runID, "--evaluator"); !strings.Contains(evlog, "=== final-1-try-1 ===") || !strings.Contains(evlog, "=== final-2-try-1 ===") {
		t.Fatalf("the evaluations' logs:\n%.2000s", evlog)
	}
}

// TestRetryEvaluationForABenchmark: a mini benchmark where one task's
// evaluator image is broken on purpose. While its runs wait, the
// leaderboard shows them as invalid (never 0) beside the scored task; one
// retry-eval over the benchmark with the fixed image scores them without
// starting their agents again, and the final leaderboard holds them.
func TestRetryEvaluationForABenchmark(t *testing.T) {
	parallel(t)
	buildEnvImage(t) // has no evaluator in it: a broken evaluator image
	e := dockerEnv(t, "MLRB_EVAL_ATTEMPTS=1")
	e.addTask("e2e_good", "mini_baby_lm", map[string]string{"trials: 24": "trials: 4"})
	e.addTask("e2e_broken", "mini_baby_lm", map[string]string{"trials: 24": "trials: 4", "  timeout: 2m": "  timeout: 2m\n  image: mlrb-envtask:e2e"})
	e.start("worker", "--dev")
	e.waitServer()
	const bench = "bench-retry"
	if _, errs, code := e.starter("benchmark", "--agents", "reference", "--tasks", "e2e_good,e2e_broken", "--seeds", "2", "--id", bench); code != 0 {
		t.Fatalf("benchmark: %s", errs)
	}
	var partial string
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		partial, _, _ = e.starter("results", bench, "--format", "csv")
		if strings.Contains(partial, "e2e_broken,reference,2,0,0,2,0,,") && strings.Contains(partial, "e2e_good,reference,2,2,0,") {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.Contains(partial, "e2e_broken,reference,2,0,0,2,0,,") {
		e.dumpLogs()
		t.Fatalf("while they wait, the broken task's runs must be invalid with no mean (never 0):\n%s", partial)
	}
	broken := []string{bench + "/reference/e2e_broken/s1", bench + "/reference/e2e_broken/s2"}
	starts := func() int {
		n := 0
		for _, id := range broken {
			logs, _, _ := e.starter("logs", id)
			n += strings.Count(logs, "start attempt=")
		}
		return n
	}
	if n := starts(); n != 2 {
		t.Fatalf("before the retry the broken task's agents started %d times, want 2", n)
	}
	out, errs, code := e.starter("retry-eval", "--benchmark", bench, "--failed", "--image", refImage)
	if code != 0 || strings.Count(out, "scored") != 2 {
		e.dumpLogs()
		t.Fatalf("retry-eval --benchmark (exit %d): %s %s", code, out, errs)
	}
	if n := starts(); n != 2 {
		t.Fatalf("after the retry the agents started %d times, want still 2", n)
	}
	deadline = time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if out, _, code = e.starter("results", bench, "--format", "csv"); code == 0 && strings.Contains(out, "e2e_broken,reference,2,2,0,") {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !strings.Contains(out, "e2e_broken,reference,2,2,0,") || !strings.Contains(out, "e2e_good,reference,2,2,0,") {
		t.Fatalf("leaderboard after the retry: %s", out)
	}
	// A run that gave its benchmark its slot back while it waited, and the
	// benchmark that took it, join the replay corpus.
	replayHistory(t, e, broken[0], "lease_here_run_parked.json")
	replayHistory(t, e, bench, "benchmark_parked.json")
	// The aggregate activity stored the leaderboard beside the checkpoints.
	for _, ext := range []string{"json", "csv", "md", "svg"} {
		if _, err := os.Stat(filepath.Join(e.state, "blobs", "benchmarks", bench, "leaderboard."+ext)); err != nil {
			t.Errorf("stored leaderboard: %v", err)
		}
	}
}
