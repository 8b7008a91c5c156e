// The driver interface: a task's spec, its handle and exit, declared capabilities.

// Package runtime is the seam between activities and whatever runs agent
// and evaluator code: local processes (Process) or containers (Docker).
// Its shape follows Nomad's task driver: Start returns a handle, the
// handle is waited on, signalled or killed, and Reap removes what a dead
// worker left behind. There is no RecoverTask: see activities.Workspace
// for why an attempt resumes from its checkpoint instead.
package runtime

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"syscall"
)

// TaskSpec is one agent or evaluator execution.
type TaskSpec struct {
	// Name is deterministic from run id, attempt and role, so a restarted
	// worker can tell its tasks from a previous incarnation's.
	Name    string
	Command []string
	Env     map[string]string
	Dir     string
	// LogPath receives stdout and stderr, appended; past LogLimit bytes
	// (0: no limit) the rest is dropped, with a line saying so.
	LogPath  string
	LogLimit int64
	Labels   map[string]string
	// Devices are the leased GPU ids; empty means CPU only.
	Devices []int

	// Container runtimes only.
	Image string
	// User is uid[:gid] to run as ("": the image's user); the writable
	// mounts are owned to it.
	User string
	// Binds are host:container[:ro] mounts.
	Binds []string
	// Network is the container's network: "" the runtime's default,
	// NetworkNone none at all, "container:<name>" another's.
	Network string
	// Door, if set, is started first and the task shares its network,
	// which has nothing but loopback: the relay there is the task's one
	// way out (internal/sandbox/gateway). Network is then ignored.
	Door *Door
	// Limits; zero means none.
	MemoryBytes int64
	CPUs        float64
	PidsLimit   int64
	// Redact lists secret values masked in the captured log.
	Redact []string
	// Starting, if set, is called once everything else is ready, just
	// before the task's process starts: what the task reads from its first
	// instruction and that counts from its start (its deadline file) is
	// written then, not before a setup whose length load decides.
	Starting func() `json:"-"`
}

// envList is Env as KEY=value, sorted so that a task's environment does
// not depend on map order.
func (spec TaskSpec) envList() []string {
	env := make([]string, 0, len(spec.Env))
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// deviceIDs are the leased GPU ids as the NVIDIA tools write them.
func (spec TaskSpec) deviceIDs() []string {
	ids := make([]string, len(spec.Devices))
	for i, d := range spec.Devices {
		ids[i] = strconv.Itoa(d)
	}
	return ids
}

// Door is the relay container an agent's network goes through.
type Door struct {
	Image   string
	Command []string
	// Binds mount the worker's gateway socket dir.
	Binds []string
	// Ready is the file (a host path) the relay writes once it accepts.
	Ready string
}

// NetworkNone gives a container no network but its own loopback.
const NetworkNone = "none"

// ExitResult is how a task ended.
type ExitResult struct {
	ExitCode int
	// Signal is the signal that killed the task, when one was sent to it
	// (an exit code past 128 that the task chose is not a signal).
	Signal    int
	OOMKilled bool
	// KilledOutside: the signal was none the handle's owner sent (an
	// operator's docker kill, the daemon stopping it, the OS): the task
	// did not end of its own doing.
	KilledOutside bool
	Err           error
}

// Successful tells whether the task exited 0 on its own.
func (r ExitResult) Successful() bool { return r.Err == nil && r.ExitCode == 0 && r.Signal == 0 }

func (r ExitResult) String() string {
	switch {
	case r.Err != nil:
		return "error: " + r.Err.Error()
	case r.OOMKilled:
		return "killed: out of memory"
	case r.Signal != 0:
		return fmt.Sprintf("killed by signal %d (%s)", r.Signal, syscall.Signal(r.Signal))
	default:
		return fmt.Sprintf("exit code %d", r.ExitCode)
	}
}

// sentSignals counts the signals a handle's owner sent, to tell its own
// kills from anyone else's.
type sentSignals struct {
	mu sync.Mutex
	n  map[int]int
}

func (s *sentSignals) add(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[int]int{}
	}
	s.n[int(sig)]++
}

func (s *sentSignals) count(sig int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[sig]
}

// Handle controls one started task.
type Handle interface {
	ID() string
	// Wait yields the exit result once, then closes.
	Wait() <-chan ExitResult
	Signal(sig syscall.Signal) error
	Kill() error
	// Destroy frees what the task left (a stopped container), once its
	// final state has been read.
	Destroy() error
}

// Observable is a task whose processes the host can see: the host pid
// of its first process (0: not known) and whether it has a cgroup of its
// own (a container), where the kernel counts its OOM kills.
type Observable interface {
	HostPID() int
	OwnCgroup() bool
}

// Runtime starts tasks and reaps orphans.
type Runtime interface {
	Start(ctx context.Context, spec TaskSpec) (Handle, error)
	// Reap kills and forgets every task left by an earlier worker process
	// on this host; it returns how many it killed.
	Reap(ctx context.Context) (int, error)
	// Policy is the sandbox Start gives spec, as recorded with its run.
	Policy(spec TaskSpec) Policy
}
