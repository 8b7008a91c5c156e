// The sampler of an attempt: processes and GPUs at each interval.

package observe

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"
	"go.uber.org/zap"
)

// Options say what a sampler samples and how often.
type Options struct {
	ProcInterval time.Duration
	GPUInterval  time.Duration
	// GPU reads the devices (nil: none are sampled).
	GPU *GPUQuery
	// Redact scrubs secrets from command lines (nil: kept as read).
	Redact func(string) string
	// Watch are words a review looks for in command lines (the task's
	// evaluator, evaluation harnesses): one past the MaxCommand bytes
	// kept is named after them, so that padding hides none.
	Watch []string
	// Latest is told each GPU sample, for the host's metrics (nil: no one).
	Latest *Latest
	Logger *zap.Logger
}

// Defaults of the observe.* keys.
const (
	DefaultProcInterval = 5 * time.Second
	DefaultGPUInterval  = 30 * time.Second
)

// Sampler samples one attempt's processes and leased GPUs on a goroutine
// of its own until Stop.
type Sampler struct {
	scope Scope
	o     Options
	fs    procfs.FS
	boot  time.Time
	now   func() time.Time

	mu      sync.Mutex
	obs     Observation
	live    map[procKey]*tracked
	lastOOM int
	// pendingOOM are kills counted whose victim was still seen (an OOM
	// victim leaves its cgroup only once it has exited), for pendingFor
	// samples.
	pendingOOM int
	pendingFor int
	gpuOff     bool
	stopOnce   sync.Once
	stop       chan struct{}
	done       chan struct{}
}

type procKey struct {
	pid   int
	ticks uint64
}

type tracked struct {
	i        int // index in obs.Procs, -1 when dropped
	lastSeen time.Time
	// cmd is the command line (its head) its Command was made from.
	cmd string
}

// Start samples scope's processes (and, with o.GPU, base.Devices) from
// now on; base names the run, the attempt, its devices, the agent time
// already used and when the attempt's clock started (zero: now).
func Start(scope Scope, o Options, base Observation) (*Sampler, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, err
	}
	boot, err := bootTime()
	if err != nil {
		return nil, err
	}
	if o.ProcInterval <= 0 {
		o.ProcInterval = DefaultProcInterval
	}
	if o.GPUInterval <= 0 {
		o.GPUInterval = DefaultGPUInterval
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	s := &Sampler{scope: scope, o: o, fs: fs, boot: boot, now: time.Now, obs: base, live: map[procKey]*tracked{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if s.obs.Start.IsZero() {
		s.obs.Start = s.now()
	}
	s.obs.Procs = []Proc{}
	s.lastOOM, s.obs.OOMKnown = scope.OOMKills()
	s.gpuOff = o.GPU == nil || len(base.Devices) == 0
	go s.loop()
	return s, nil
}

func (s *Sampler) loop() {
	defer close(s.done)
	procs := time.NewTicker(s.o.ProcInterval)
	defer procs.Stop()
	gpus := time.NewTicker(s.o.GPUInterval)
	defer gpus.Stop()
	s.sampleProcs()
	s.sampleGPUs()
	for {
		select {
		case <-s.stop:
			return
		case <-procs.C:
			s.sampleProcs()
		case <-gpus.C:
			s.sampleGPUs()
		}
	}
}

// Stopping marks the moment the harness began to stop the agent (its
// deadline, a hand-back, a cancel): a process alive then was cut off.
// It samples at once, so that what was alive is known.
func (s *Sampler) Stopping() {
	s.mu.Lock()
	if s.obs.StopAt.IsZero() {
		s.obs.StopAt = s.now()
	}
	s.mu.Unlock()
	// Sampled after StopAt: what it sees was alive at the stop.
	s.sampleProcs()
}

// Checkpoint records what a committed checkpoint added.
func (s *Sampler) Checkpoint(c CheckpointAdds) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.obs.Checkpoints = append(s.obs.Checkpoints, c)
}

// Call records an LLM call of the attempt.
// Past MaxCalls spans, a call is merged into the last one (its end and
// dollars kept): an attempt's observation stays readable, and its marks
// costed, whatever the agent sends.
func (s *Sampler) Call(c Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.obs.Calls); n >= MaxCalls {
		last := &s.obs.Calls[n-1]
		last.End = maxTime(last.End, c.End)
		last.USD += c.USD
		return
	}
	s.obs.Calls = append(s.obs.Calls, c)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Snapshot is the observation so far.
func (s *Sampler) Snapshot() *Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.obs
	o.Procs = slices.Clone(s.obs.Procs)
	o.GPU = slices.Clone(s.obs.GPU)
	o.Checkpoints = slices.Clone(s.obs.Checkpoints)
	o.Calls = slices.Clone(s.obs.Calls)
	o.End = s.now()
	return &o
}

// Stop takes a last sample, stops sampling and returns the observation,
// ended as the attempt did.
func (s *Sampler) Stop(ended string) *Observation {
	s.stopOnce.Do(func() {
		close(s.stop)
		<-s.done
		s.sampleProcs()
	})
	s.mu.Lock()
	s.obs.Ended = ended
	s.mu.Unlock()
	return s.Snapshot()
}

// sampleProcs reads the scope's processes: new ones are added, gone
// ones end at their last sight, and the cgroup's new OOM kills are
// given to the largest of those gone.
func (s *Sampler) sampleProcs() {
	pids, err := s.scope.PIDs()
	now := s.now()
	if err != nil {
		// The scope is gone (the container removed): what was alive
		// ended by the last sample.
		pids = nil
	}
	infos := make([]procInfo, 0, len(pids))
	for _, pid := range pids {
		if pi, err := readProc(s.fs, s.boot, pid); err == nil {
			infos = append(infos, pi)
		}
	}
	ooms, oomOK := s.scope.OOMKills()
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[procKey]bool{}
	for _, pi := range infos {
		k := procKey{pi.pid, pi.ticks}
		seen[k] = true
		t := s.live[k]
		if t == nil {
			t = &tracked{i: -1}
			s.live[k] = t
			if len(s.obs.Procs) < MaxProcs {
				t.i = len(s.obs.Procs)
				s.obs.Procs = append(s.obs.Procs, Proc{PID: pi.pid, PPID: pi.ppid, Root: pi.pid == s.scope.RootPID(), Start: pi.start})
			} else {
				s.obs.Dropped++
			}
		}
		t.lastSeen = now
		if t.i >= 0 {
			p := &s.obs.Procs[t.i]
			p.CPUS = pi.cpuS
			p.PeakRSS = max(p.PeakRSS, pi.hwm)
			// A process read between its fork and its exec shows its
			// parent's command line, or none mid-exec: it keeps the
			// last one it showed.
			if pi.cmd != "" && pi.cmd != t.cmd {
				p.Command, t.cmd = s.command(pi.cmd), pi.cmd
			}
		}
	}
	var gone []int
	for k, t := range s.live {
		if seen[k] {
			continue
		}
		delete(s.live, k)
		if t.i >= 0 {
			s.obs.Procs[t.i].End, s.obs.Procs[t.i].Gone = t.lastSeen, now
			gone = append(gone, t.i)
		}
	}
	if oomOK && ooms > s.lastOOM {
		s.pendingOOM += ooms - s.lastOOM
		s.lastOOM = ooms
	}
	if s.pendingOOM > 0 {
		s.pendingOOM -= s.blameOOM(gone, s.pendingOOM)
		s.pendingFor++
		// A victim never seen (gone before it was first read) is not
		// waited for past a few samples.
		if s.pendingOOM == 0 || s.pendingFor > 5 {
			s.pendingOOM, s.pendingFor = 0, 0
		}
	}
}

// blameOOM marks the n largest of the processes just gone as OOM-killed
// (the kernel's OOM killer picks the largest in the cgroup) and returns
// how many it marked.
func (s *Sampler) blameOOM(gone []int, n int) int {
	sort.Slice(gone, func(a, b int) bool { return s.obs.Procs[gone[a]].PeakRSS > s.obs.Procs[gone[b]].PeakRSS })
	k := min(n, len(gone))
	for _, i := range gone[:k] {
		s.obs.Procs[i].OOMKilled = true
	}
	return k
}

func (s *Sampler) command(c string) string {
	if s.o.Redact != nil {
		c = s.o.Redact(c)
	}
	if len(c) > MaxCommand {
		var also []string
		for _, w := range s.o.Watch {
			if w != "" && !strings.Contains(c[:MaxCommand], w) && strings.Contains(c[MaxCommand:], w) {
				also = append(also, w)
			}
		}
		c = c[:MaxCommand] + "…"
		if len(also) > 0 {
			c += " [further on: " + strings.Join(also, " ") + "]"
		}
	}
	return c
}

// sampleGPUs reads the leased devices and which processes hold memory on
// them. A host without the command stops asking.
func (s *Sampler) sampleGPUs() {
	if s.gpuOff {
		return
	}
	ctx := context.Background()
	devs, err := s.o.GPU.Devices(ctx, s.obs.Devices, s.now())
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			s.o.Logger.Info("no GPU query command on this host: GPUs are not sampled", zap.Error(err))
			s.gpuOff = true
		} else {
			s.o.Logger.Warn("sample the GPUs", zap.Error(err))
		}
		return
	}
	apps, err := s.o.GPU.Apps(ctx, s.obs.Devices)
	if err != nil {
		s.o.Logger.Warn("sample the GPUs' processes", zap.Error(err))
	}
	s.o.Latest.Set(devs)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.obs.GPU = append(s.obs.GPU, devs...)
	for k, t := range s.live {
		if mib := apps[k.pid]; mib > 0 && t.i >= 0 {
			p := &s.obs.Procs[t.i]
			p.GPUMiB = max(p.GPUMiB, mib)
		}
	}
}
