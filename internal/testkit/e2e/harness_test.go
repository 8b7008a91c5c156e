// Package e2e runs the real binaries: a worker with its embedded Temporal
// server, the starter, agent processes, crashes.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/kit/ports"
)

var bin string // dir holding the worker and starter binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mlrb-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	// One build of each binary for the whole package, the three at once
	// (a link is mostly one core's work); mlrb-agent beside them runs the
	// built-in agents, built static as `task build` lays it out, and is
	// the reference image's binary too (staticBinary).
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for b, pkg := range map[string]string{"worker": "worker", "starter": "starter", "mlrb-agent": "cmd/mlrb-agent"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b), "github.com/mlrb/mlrb/"+pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if b == "mlrb-agent" {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			built[pkg] = filepath.Join(dir, b)
		}
		wg.Go(func() {
			if err := cmd.Run(); err != nil {
				errs <- fmt.Errorf("build %s: %w", b, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", defaultParallel)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// parallel runs a test beside the others: each has its own server,
// worker, state dir, port and host id, and much of their time is waiting
// on agents and deadlines. Every test runs so, the timed ones too: a bound
// they check (a fence within the heartbeat timeout, a lease freed long
// before its TTL) holds on a loaded host or it is a defect. The tests
// that submit to the one Slurm cluster take turns (testenv.Hold).
func parallel(t *testing.T) { t.Parallel() }

// defaultParallel is how many tests run at once unless -test.parallel
// says otherwise: at 4 two cores stayed 85% idle and the suite took
// 435 s; at 8 they are busy and it takes about 270 s; more only adds
// load.
const defaultParallel = "8"

// pollEvery paces the waits that ask the starter: each asking starts
// the whole starter (about 40 ms of CPU, most of it its 900 packages'
// init), and the suite runs many such waits at once on two cores.
const pollEvery = 500 * time.Millisecond

// freePort holds a port for the whole test: a worker killed and started
// again binds it again, and nothing else may take it meanwhile.
func freePort(t *testing.T) int {
	t.Helper()
	p, err := ports.Reserve("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Release)
	return p.Number
}

// env is one test's world: a state dir, a port, a task dir, config env.
type env struct {
	t        *testing.T
	state    string
	port     int
	tasksDir string
	vars     []string
	// worker is the worker a helper started, when one did.
	worker *proc
	// timeout bounds each starter command (3 minutes when 0).
	timeout time.Duration
}

func newEnv(t *testing.T, vars ...string) *env {
	e := &env{t: t, state: t.TempDir(), port: freePort(t), tasksDir: t.TempDir()}
	e.vars = append([]string{
		"MLRB_DEV_STATE_DIR=" + e.state,
		"MLRB_DEV_PORT=" + strconv.Itoa(e.port),
		"MLRB_DEV_UI_PORT=0",
		"MLRB_TEMPORAL_ADDRESS=127.0.0.1:" + strconv.Itoa(e.port),
		"MLRB_TASKS_DIR=" + e.tasksDir,
		"MLRB_HOST_ID=e2e",
		"MLRB_LOG_LEVEL=debug",
		// Curves add evaluations after each run; the tests of score over
		// time turn them on (report_test.go).
		"MLRB_EVAL_CURVE=off",
	}, vars...)
	return e
}

// addTask writes a mini task derived from an embedded one.
func (e *env) addTask(id, from string, edits map[string]string) {
	e.t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(e.t), "tasks", "catalog", from+".yaml"))
	if err != nil {
		e.t.Fatal(err)
	}
	s := strings.Replace(string(raw), "id: "+from, "id: "+id, 1)
	for old, repl := range edits {
		if !strings.Contains(s, old) {
			e.t.Fatalf("task %s has no %q", from, old)
		}
		s = strings.Replace(s, old, repl, 1)
	}
	if err := os.WriteFile(filepath.Join(e.tasksDir, id+".yaml"), []byte(s), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

type proc struct {
	cmd *exec.Cmd
}

func (e *env) start(name string, args ...string) *proc {
	e.t.Helper()
	return e.startAs(name, nil, name, args...)
}

// startAs starts a binary logging to <as>.log with vars over the env's
// (one of several workers, each its own host).
func (e *env) startAs(as string, vars []string, name string, args ...string) *proc {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Env = append(append(os.Environ(), e.vars...), vars...)
	logf, err := os.OpenFile(filepath.Join(e.state, as+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &proc{cmd: cmd}
	e.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
		}
		_ = logf.Close()
	})
	return p
}

// stop sends SIGTERM and waits for the process to exit.
func (p *proc) stop(t *testing.T, within time.Duration) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _, _ = p.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("%s did not exit within %s of SIGTERM", p.cmd.Path, within)
	}
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = p.cmd.Process.Wait()
}

// starter runs the starter and returns stdout, stderr and the exit code.
func (e *env) starter(args ...string) (string, string, int) {
	e.t.Helper()
	return e.starterWith(e.vars, args...)
}

// starterWith runs the starter with vars in place of the env's.
func (e *env) starterWith(vars []string, args ...string) (string, string, int) {
	e.t.Helper()
	return e.starterAt("", vars, args...)
}

// starterIn runs the starter in dir, as a reader would from there.
func (e *env) starterIn(dir string, args ...string) (string, string, int) {
	e.t.Helper()
	return e.starterAt(dir, e.vars, args...)
}

// starterAt runs the starter in dir ("": the test's) with vars.
func (e *env) starterAt(dir string, vars []string, args ...string) (string, string, int) {
	e.t.Helper()
	timeout := e.timeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "starter"), args...)
	cmd.Env, cmd.Dir = append(os.Environ(), vars...), dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func (e *env) starterJSON(v any, args ...string) {
	e.t.Helper()
	out, errs, code := e.starter(args...)
	if code != 0 {
		e.t.Fatalf("starter %v: exit %d: %s", args, code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("starter %v: %v in %q", args, err, out)
	}
}

// startRun starts a run with `starter run … --json` and returns its id.
func (e *env) startRun(args ...string) string {
	e.t.Helper()
	var started struct {
		RunID string `json:"run_id"`
	}
	e.starterJSON(&started, append(append([]string{"run"}, args...), "--json")...)
	return started.RunID
}

// waitServer waits until the frontend port accepts connections.
func (e *env) waitServer() {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, _, code := e.starter("list", "--limit", "1"); code == 0 {
			return
		}
		time.Sleep(pollEvery)
	}
	e.dumpLogs()
	e.t.Fatal("embedded server did not come up")
}

func (e *env) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(e.state, "*.log"))
	for _, n := range logs {
		if b, err := os.ReadFile(n); err == nil {
			s := string(b)
			if len(s) > 6000 {
				s = s[len(s)-6000:]
			}
			e.t.Logf("--- %s ---\n%s", filepath.Base(n), s)
		}
	}
}

type status struct {
	RunID              string   `json:"run_id"`
	Phase              string   `json:"phase"`
	Attempt            int      `json:"attempt"`
	Checkpoints        int      `json:"checkpoints"`
	LastCheckpointAgeS *float64 `json:"last_checkpoint_age_s"`
	BudgetLeftS        float64  `json:"budget_left_s"`
}

type result struct {
	RunID       string             `json:"run_id"`
	Task        string             `json:"task"`
	Agent       string             `json:"agent"`
	Seed        int64              `json:"seed"`
	Outcome     string             `json:"outcome"`
	Score       *float64           `json:"score"`
	Metrics     map[string]float64 `json:"metrics"`
	Attempts    int                `json:"attempts"`
	Checkpoints int                `json:"checkpoints"`
	SpecHash    string             `json:"spec_hash"`
	Reason      string             `json:"reason"`
	ModelPath   string             `json:"model_path"`
	AgentImage  string             `json:"agent_image"`
	EvalImage   string             `json:"evaluator_image"`
	Cost        struct {
		GPUHours       float64 `json:"gpu_hours"`
		BilledGPUHours float64 `json:"billed_gpu_hours"`
	} `json:"cost"`
	Budget struct {
		GrantedS   float64 `json:"granted_s"`
		UsedS      float64 `json:"used_s"`
		LostS      float64 `json:"lost_s"`
		InfraWaitS float64 `json:"infra_wait_s"`
	} `json:"budget"`
}

// waitCheckpoints polls status until the run has n checkpoints.
func (e *env) waitCheckpoints(runID string, n int) status {
	e.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		out, _, code := e.starter("status", runID, "--json")
		var st status
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.Checkpoints >= n {
			return st
		}
		time.Sleep(pollEvery)
	}
	e.dumpLogs()
	e.t.Fatalf("run %s never reached %d checkpoints", runID, n)
	return status{}
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie has exited; only its parent has not reaped it yet.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// agentPIDs lists live reference-agent processes started from this env.
func (e *env) agentPIDs() []int { return agentPIDsUnder(e.state) }

// agentExe is the binary a live agent of this env runs, waiting up to
// 30 s for one to start.
func (e *env) agentExe() string {
	e.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, pid := range e.agentPIDs() {
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil {
				return exe
			}
		}
	}
	e.t.Fatal("no agent process started in 30 s")
	return ""
}

// realPath is p with its symbolic links resolved, as /proc/PID/exe has it.
func realPath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// agentPIDsUnder lists live agent processes whose workdir is under dir.
func agentPIDsUnder(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		envb, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(envb, []byte("MLRB_WORKDIR="+dir)) {
			continue
		}
		if alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// client dials the env's Temporal server; it is closed when the test ends.
func (e *env) client() client.Client {
	e.t.Helper()
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:" + strconv.Itoa(e.port)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

// history exports a run's event history.
func (e *env) history(runID string) *historypb.History {
	e.t.Helper()
	return e.historyOf(runID, "")
}

// installTemporal is how to get the official temporal CLI.
const installTemporal = "go install github.com/temporalio/cli/cmd/temporal@v1.5.1"

// exportHistory is an execution's history as the temporal CLI exports it
// for replay (`workflow show --output json`).
func (e *env) exportHistory(temporal, id, execution string) []byte {
	e.t.Helper()
	args := []string{"workflow", "show", "--workflow-id", id, "--address", "127.0.0.1:" + strconv.Itoa(e.port), "--namespace", "default", "--output", "json"}
	if execution != "" {
		args = append(args, "--run-id", execution)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, temporal, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("temporal %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// historyOf reads the history of one execution of a workflow ("": the
// latest) through the SDK.
func (e *env) historyOf(id, execution string) *historypb.History {
	e.t.Helper()
	it := e.client().GetWorkflowHistory(context.Background(), id, execution, false, 0)
	hist := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			e.t.Fatal(err)
		}
		hist.Events = append(hist.Events, ev)
	}
	return hist
}
