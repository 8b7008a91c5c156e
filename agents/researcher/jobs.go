// Job is a background command.

package researcher

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Job is a background command: its output goes to a log in the agent's
// home, so what it printed is in every checkpoint taken while it ran.
type Job struct {
	ID      string    `json:"id"`
	Command string    `json:"command"`
	Attempt int       `json:"attempt"`
	Started time.Time `json:"started"`
	Log     string    `json:"log"` // relative to the work dir
	// Status is running, exited, cancelled, or lost (its attempt died
	// while it ran).
	Status string    `json:"status"`
	Exit   int       `json:"exit,omitempty"`
	Ended  time.Time `json:"ended,omitzero"`
}

// Job states.
const (
	JobRunning   = "running"
	JobExited    = "exited"
	JobCancelled = "cancelled"
	JobLost      = "lost"
)

// jobs are this attempt's live background processes, beside the state's
// record of every job.
type jobs struct {
	workdir string
	mu      sync.Mutex
	live    map[string]*liveJob
}

type liveJob struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func newJobs(workdir string) *jobs { return &jobs{workdir: workdir, live: map[string]*liveJob{}} }

// shellCommand runs line under sh in its own process group, so a
// timeout or a cancel ends everything it started.
func shellCommand(workdir, line string) *exec.Cmd {
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Dir = workdir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// start begins j, its output appended to its log; update is called under
// no lock once it ends.
func (js *jobs) start(j *Job, update func(*Job)) error {
	logPath := filepath.Join(js.workdir, j.Log)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return fmt.Errorf("job log: %w", err)
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("job log: %w", err)
	}
	cmd := shellCommand(js.workdir, j.Command)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start job: %w", err)
	}
	lj := &liveJob{cmd: cmd, done: make(chan struct{})}
	js.mu.Lock()
	js.live[j.ID] = lj
	js.mu.Unlock()
	go func() {
		err := cmd.Wait()
		_ = f.Close()
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		// The state first: a check that finds the job gone from live
		// reads its end.
		update(&Job{ID: j.ID, Status: JobExited, Exit: code, Ended: time.Now().UTC()})
		js.mu.Lock()
		delete(js.live, j.ID)
		js.mu.Unlock()
		close(lj.done)
	}()
	return nil
}

// wait waits up to d for job id to end; true if it has.
func (js *jobs) wait(ctx context.Context, id string, d time.Duration) bool {
	js.mu.Lock()
	lj := js.live[id]
	js.mu.Unlock()
	if lj == nil {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-lj.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// cancel kills job id's process group and waits for it to be reaped.
func (js *jobs) cancel(id string) bool {
	js.mu.Lock()
	lj := js.live[id]
	js.mu.Unlock()
	if lj == nil {
		return false
	}
	killGroup(lj.cmd)
	<-lj.done
	return true
}

// running is how many jobs of this attempt still run.
func (js *jobs) running() int {
	js.mu.Lock()
	defer js.mu.Unlock()
	return len(js.live)
}

func jobID(n int) string { return "job-" + strconv.Itoa(n) }

func (a *Agent) jobStart(_ context.Context, args json.RawMessage) (string, error) {
	var in struct{ Command string }
	if err := decode(args, &in); err != nil {
		return "", err
	}
	if in.Command == "" {
		return "", fmt.Errorf("command is empty")
	}
	a.mu.Lock()
	a.state.NextJob++
	id := jobID(a.state.NextJob)
	j := &Job{ID: id, Command: in.Command, Attempt: a.Env.Attempt, Started: time.Now().UTC(),
		Log: filepath.Join(Home, "jobs", id+".log"), Status: JobRunning}
	a.state.Jobs[id] = j
	a.mu.Unlock()
	err := a.jobs.start(j, func(end *Job) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if cur := a.state.Jobs[end.ID]; cur != nil && cur.Status == JobRunning {
			cur.Status, cur.Exit, cur.Ended = end.Status, end.Exit, end.Ended
		}
	})
	if err != nil {
		a.mu.Lock()
		delete(a.state.Jobs, id)
		a.mu.Unlock()
		return "", err
	}
	return fmt.Sprintf("started %s; its output goes to %s", id, j.Log), nil
}

func (a *Agent) jobCheck(ctx context.Context, args json.RawMessage) (string, error) {
	var in struct {
		ID    string `json:"id"`
		WaitS int    `json:"wait_s"`
	}
	if err := decode(args, &in); err != nil {
		return "", err
	}
	if w := min(time.Duration(in.WaitS)*time.Second, maxJobWait, time.Until(a.Env.CurrentDeadline())-a.margin); w > 0 {
		a.jobs.wait(ctx, in.ID, w)
	}
	a.mu.Lock()
	j := a.state.Jobs[in.ID]
	var cp Job
	if j != nil {
		cp = *j
	}
	a.mu.Unlock()
	if j == nil {
		return "", fmt.Errorf("no job %q", in.ID)
	}
	return describeJob(a.Env.Workdir, cp), nil
}

// maxJobWait bounds one job_check's wait: the model hears of its time
// between waits.
const maxJobWait = 10 * time.Minute

func describeJob(workdir string, j Job) string {
	head := fmt.Sprintf("%s %s (started %s by attempt %d): %s", j.ID, j.Status, j.Started.Format(time.RFC3339), j.Attempt, j.Command)
	if j.Status == JobExited {
		head += fmt.Sprintf("; exit %d at %s", j.Exit, j.Ended.Format(time.RFC3339))
	}
	b, _ := os.ReadFile(filepath.Join(workdir, j.Log))
	tail := string(b)
	if len(tail) > outputLimit/2 {
		tail = "[... the whole log is " + j.Log + "]\n" + validUTF8(tail[len(tail)-outputLimit/2:])
	}
	return head + "\n" + tail
}

func (a *Agent) jobCancel(_ context.Context, args json.RawMessage) (string, error) {
	var in struct{ ID string }
	if err := decode(args, &in); err != nil {
		return "", err
	}
	if !a.jobs.cancel(in.ID) {
		return "", fmt.Errorf("job %q is not running in this attempt", in.ID)
	}
	a.mu.Lock()
	if j := a.state.Jobs[in.ID]; j != nil {
		j.Status = JobCancelled
	}
	a.mu.Unlock()
	return "cancelled " + in.ID, nil
}
