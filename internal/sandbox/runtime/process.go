// Process runs tasks as local processes, each in its own process group.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
)

// Process runs tasks as local processes, each in its own process group.
type Process struct {
	// StateDir keeps one record per live task, so that a worker restarted
	// after a crash can kill what its predecessor started.
	StateDir string
}

// NewProcess returns a process runtime keeping records under stateDir.
func NewProcess(stateDir string) (*Process, error) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("process runtime: %w", err)
	}
	return &Process{StateDir: stateDir}, nil
}

type procRecord struct {
	Name      string            `json:"name"`
	PID       int               `json:"pid"`
	StartTime string            `json:"start_time"`
	Labels    map[string]string `json:"labels"`
}

type procHandle struct {
	name string
	pid  int
	done chan ExitResult
	sent sentSignals
}

func (h *procHandle) ID() string              { return h.name }
func (h *procHandle) Wait() <-chan ExitResult { return h.done }
func (h *procHandle) Kill() error             { return h.Signal(syscall.SIGKILL) }
func (h *procHandle) Destroy() error          { return nil }
func (h *procHandle) HostPID() int            { return h.pid }
func (h *procHandle) OwnCgroup() bool         { return false }
func (h *procHandle) Signal(s syscall.Signal) error {
	h.sent.add(s)
	// The whole group: an agent's own children go with it.
	if err := syscall.Kill(-h.pid, s); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s to %s: %w", s, h.name, err)
	}
	return nil
}

// baseEnv is the little of the worker's environment a task inherits; the
// worker's own secrets stay out of agent processes.
var baseEnv = []string{"PATH", "HOME", "TMPDIR", "LANG", "TZ"}

// processEnv is a process task's environment: the worker's base
// variables, the task's, and the GPUs it may see.
func processEnv(spec TaskSpec) []string {
	var env []string
	for _, k := range baseEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, spec.envList()...)
	// Always set: empty hides every GPU from a task with no lease, rather
	// than letting it see all of them.
	return append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(spec.deviceIDs(), ","))
}

// Start launches the task. The child gets SIGKILL when the worker dies
// (Pdeathsig), so an agent never outlives the worker that ran it.
func (p *Process) Start(_ context.Context, spec TaskSpec) (Handle, error) {
	if len(spec.Command) == 0 {
		return nil, fmt.Errorf("start %s: empty command", spec.Name)
	}
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: log: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir, cmd.Env = spec.Dir, processEnv(spec)
	out := Redacting(Capped(logf, spec.LogLimit), spec.Redact)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	h := &procHandle{name: spec.Name, done: make(chan ExitResult, 1)}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the creating thread exits, not the process:
		// keep this thread for the child's whole life.
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		defer func() { _ = out.Close(); _ = logf.Close() }()
		if spec.Starting != nil {
			spec.Starting()
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		h.pid = cmd.Process.Pid
		rec := p.recordPath(spec.Name)
		if err := p.writeRecord(rec, procRecord{Name: spec.Name, PID: h.pid, StartTime: startTime(h.pid), Labels: spec.Labels}); err != nil {
			_ = syscall.Kill(-h.pid, syscall.SIGKILL)
			_ = cmd.Wait()
			started <- err
			return
		}
		started <- nil
		err := cmd.Wait()
		_ = os.Remove(rec)
		res := exitResult(cmd.ProcessState, err)
		// A process that exits with a code cannot pass for signalled, so
		// a signal nobody here sent came from outside (or the task sent
		// it to itself: processes run trusted built-in agents).
		res.KilledOutside = res.Signal != 0 && h.sent.count(res.Signal) == 0
		h.done <- res
		close(h.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", spec.Name, spec.Command[0], err)
	}
	return h, nil
}

func exitResult(st *os.ProcessState, err error) ExitResult {
	if st == nil {
		return ExitResult{ExitCode: -1, Err: err}
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ExitResult{ExitCode: -1, Signal: int(ws.Signal())}
	}
	return ExitResult{ExitCode: st.ExitCode()}
}

func (p *Process) recordPath(name string) string {
	safe := strings.NewReplacer("/", "_", string(filepath.Separator), "_").Replace(name)
	return filepath.Join(p.StateDir, safe+".json")
}

func (p *Process) writeRecord(path string, r procRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("process record: %w", err)
	}
	return os.Rename(tmp, path)
}

// Reap kills the process group of every recorded task whose leader is still
// the process that was started (same start time), then drops the records.
func (p *Process) Reap(_ context.Context) (int, error) {
	entries, err := os.ReadDir(p.StateDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("reap: %w", err)
	}
	killed := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(p.StateDir, e.Name())
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // its task ended and dropped it meanwhile
		}
		if err != nil {
			return killed, fmt.Errorf("reap: %w", err)
		}
		var r procRecord
		if json.Unmarshal(b, &r) == nil && r.PID > 0 && r.StartTime != "" && startTime(r.PID) == r.StartTime {
			if err := syscall.Kill(-r.PID, syscall.SIGKILL); err == nil {
				killed++
			}
		}
		// The killed task's own waiter may drop the record first (a runtime
		// that is still alive in this process): gone either way.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return killed, fmt.Errorf("reap: %w", err)
		}
	}
	return killed, nil
}

// startTime reads a process's start time in clock ticks from /proc, which
// tells a live task from an unrelated process that reused its pid.
func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}
