package activities

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/mlrb/mlrb/internal/checkpoint"
)

// liveness heartbeats an activity from its first line to its return,
// whatever the activity is doing, on a goroutine of its own: no step (a
// 20 GB restore, a final save, a hung store) can hold the heartbeat back.
// Each heartbeat carries the step and its progress.
type liveness struct {
	mu      sync.Mutex
	p       Progress
	done    atomic.Int64
	stop    chan struct{}
	stopped chan struct{}
	dir     string
}

// live starts heartbeating ctx's activity of this host, whose work disk
// holds dir.
func (a *Activities) live(ctx context.Context) *liveness {
	l := &liveness{stop: make(chan struct{}), stopped: make(chan struct{}), dir: a.WorkDir}
	l.p.Host = a.HostID
	every := heartbeatEvery(activity.GetInfo(ctx).HeartbeatTimeout)
	go func() {
		defer close(l.stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			activity.RecordHeartbeat(ctx, l.progress())
			select {
			case <-l.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return l
}

// step names what the activity does now; total is the bytes it will move
// (0: not a transfer).
func (l *liveness) step(name string, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.Step, l.p.TotalBytes = name, total
	l.done.Store(0)
}

// agent records the agent time reached.
func (l *liveness) agent(seconds float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.AgentSeconds = seconds
}

// counting is ctx with the checkpoint engine's byte counts going to the
// current step's progress.
func (l *liveness) counting(ctx context.Context) context.Context {
	return checkpoint.WithProgress(ctx, func(n int64) { l.done.Add(n) })
}

func (l *liveness) progress() Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.p
	p.DoneBytes = l.done.Load()
	if free, err := freeBytes(l.dir); err == nil {
		p.FreeBytes = free
	}
	return p
}

// close stops the heartbeats; the activity's result or error follows.
func (l *liveness) close() {
	close(l.stop)
	<-l.stopped
}

// String is the step as an operator reads it: "restoring 4.1 of 19.8 GiB".
func (p Progress) String() string {
	switch {
	case p.Step == "":
		return ""
	case p.TotalBytes > 0:
		return fmt.Sprintf("%s %.1f of %.1f GiB", p.Step, gib(p.DoneBytes), gib(p.TotalBytes))
	case p.DoneBytes > 0:
		return fmt.Sprintf("%s %.1f GiB", p.Step, gib(p.DoneBytes))
	}
	return p.Step
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }

// Steps an attempt or an evaluation reports.
const (
	stepPreparing   = "preparing"
	stepRestoring   = "restoring"
	stepStarting    = "starting the agent"
	stepRunning     = "running"
	stepFinalSave   = "final save"
	stepHandBack    = "hand-back save"
	stepFindModel   = "checking the model"
	stepEvaluating  = "evaluating"
	stepReadResults = "reading results"
)
