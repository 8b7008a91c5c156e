// liveness heartbeats an activity from its first line to its return, whatever the activity is doing, on a goroutine of its own.

package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// Liveness heartbeats an activity from its first line to its return,
// whatever the activity is doing, on a goroutine of its own: no step (a
// 20 GB restore, a final save, a hung store) can hold the heartbeat back.
// Each heartbeat carries the step and its progress.
//
// It also fences the attempt: when the server says the activity is gone
// (timed out, its run ended) or no heartbeat has reached it for the
// heartbeat timeout, the run has, or soon will have, handed the work to
// another attempt. The activity's context is then canceled with ErrFenced,
// which stops the agent and commits nothing more.
type Liveness struct {
	mu      sync.Mutex
	p       activities.Heartbeat
	done    atomic.Int64
	stop    chan struct{}
	stopped chan struct{}
	dir     string
	cancel  context.CancelCauseFunc
	log     *zap.Logger
	// renew keeps the attempt's GPU lease alive (nil: no lease held).
	renew func()
}

// Pulse is where an activity's liveness reports: the host it runs on,
// the client its heartbeats go through (nil: the SDK's), where progress
// goes outside any activity, and its log.
type Pulse struct {
	Host     *Host
	Client   client.Client
	Progress func(activities.Heartbeat)
	Logger   *zap.Logger
}

// beat sends one heartbeat; its error is the server's answer.
type beat func(ctx context.Context, p activities.Heartbeat) error

// Live starts heartbeating ctx's activity of this host, whose work disk
// holds dir. The activity runs under the returned context.
//
// A lease the activity holds (token, "" for none) is claimed on this
// host's pool, and renewed by each heartbeat that reaches the server: it
// lapses one TTL after the run stops hearing from the activity.
func (p Pulse) Live(ctx context.Context, lease *activities.Lease) (context.Context, *Liveness, error) {
	h := p.Host
	ctx, cancel := context.WithCancelCause(ctx)
	l := &Liveness{stop: make(chan struct{}), stopped: make(chan struct{}), dir: h.WorkDir, cancel: cancel}
	if lease != nil && lease.Token != "" && h.GPUs != nil {
		if err := h.GPUs.Claim(lease.Token, lease.Devices); err != nil {
			cancel(err)
			return nil, nil, fmt.Errorf("lease on %s: %w", h.HostID, err)
		}
		pool, token := h.GPUs, lease.Token
		l.renew = func() { pool.Renew(token) }
	}
	l.p.Host = h.HostID
	var info activity.Info
	send := p.outside
	if activity.IsActivity(ctx) {
		info = activity.GetInfo(ctx)
		send = p.heartbeat(info)
	}
	l.log = p.Logger.With(zap.String("run", info.WorkflowExecution.ID), zap.String("activity", info.ActivityType.Name), zap.Int32("try", info.Attempt))
	go func() {
		defer close(l.stopped)
		l.run(ctx, send, info.HeartbeatTimeout, beatEvery(info.HeartbeatTimeout), time.Now)
	}()
	return ctx, l, nil
}

// heartbeat is how this worker reaches the server: through its client,
// so that it knows each heartbeat's fate, or the SDK's throttled
// heartbeats where there is no client (tests of single activities).
func (p Pulse) heartbeat(info activity.Info) beat {
	if p.Client == nil {
		return func(ctx context.Context, hb activities.Heartbeat) error {
			activity.RecordHeartbeat(ctx, hb)
			return nil
		}
	}
	timeout := beatEvery(info.HeartbeatTimeout)
	return func(ctx context.Context, hb activities.Heartbeat) error {
		hctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return p.Client.RecordActivityHeartbeat(hctx, info.TaskToken, hb)
	}
}

// outside is where the progress of an activity's code run outside any
// activity goes (a rescore, in the starter): to Evaluations.Progress, if
// set.
func (p Pulse) outside(_ context.Context, hb activities.Heartbeat) error {
	if p.Progress != nil {
		p.Progress(hb)
	}
	return nil
}

// TryOf is the activity's try; 1 outside an activity.
func TryOf(ctx context.Context) int32 {
	if !activity.IsActivity(ctx) {
		return 1
	}
	return activity.GetInfo(ctx).Attempt
}

// beatEvery paces heartbeats: four per timeout, so that one or two lost
// ones do not lose the attempt.
func beatEvery(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return 10 * time.Second
	}
	return timeout / 4
}

func (l *Liveness) run(ctx context.Context, send beat, timeout, every time.Duration, now func() time.Time) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	lastOK := now()
	for {
		err := send(ctx, l.progress())
		t := now()
		var notFound *serviceerror.NotFound
		switch {
		case err == nil, errors.Is(err, activity.ErrActivityPaused), errors.Is(err, activity.ErrActivityReset):
			lastOK = t
			if l.renew != nil {
				l.renew()
			}
		case temporal.IsCanceledError(err):
			l.cancel(context.Canceled) // the run canceled the activity
			return
		case errors.As(err, &notFound):
			l.fenced(fmt.Errorf("the server no longer knows this attempt (%w)", err))
			return
		case ctx.Err() != nil:
			return
		case timeout > 0 && t.Sub(lastOK) >= timeout:
			l.fenced(fmt.Errorf("no heartbeat reached the server for %s (the heartbeat timeout): %w", t.Sub(lastOK).Round(time.Second), err))
			return
		}
		select {
		case <-l.stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Fence ends the attempt: a later one owns the run.
func (l *Liveness) Fence(err error) { l.fenced(err) }

// fenced says so before it stops anything, so that whoever sees the agent
// stopped finds the reason already in the log.
func (l *Liveness) fenced(why error) {
	l.log.Warn("attempt fenced: its agent is stopped and it commits nothing", zap.Error(why))
	l.cancel(fmt.Errorf("%w: %v", activities.ErrFenced, why))
}

// Step names what the activity does now; total is the bytes it will move
// (0: not a transfer).
func (l *Liveness) Step(name string, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.Step, l.p.TotalBytes = name, total
	l.done.Store(0)
}

// Agent records the agent time reached.
func (l *Liveness) Agent(seconds float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.AgentSeconds = seconds
}

// Counting is ctx with the checkpoint engine's byte counts going to the
// current step's progress.
func (l *Liveness) Counting(ctx context.Context) context.Context {
	return checkpoint.WithProgress(ctx, func(n int64) { l.done.Add(n) })
}

func (l *Liveness) progress() activities.Heartbeat {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.p
	p.DoneBytes = l.done.Load()
	if free, err := FreeBytes(l.dir); err == nil {
		p.FreeBytes = free
	}
	return p
}

// Close stops the heartbeats; the activity's result or error follows.
func (l *Liveness) Close() {
	close(l.stop)
	<-l.stopped
	l.cancel(nil)
}

// Steps an attempt or an evaluation reports.
const (
	StepPreparing   = "preparing"
	StepRestoring   = "restoring"
	StepStarting    = "starting the agent"
	StepRunning     = "running"
	StepFinalSave   = "final save"
	StepHandBack    = "hand-back save"
	StepFindModel   = "checking the model"
	StepEvaluating  = "evaluating"
	StepReadResults = "reading results"
	StepChecking    = "checking outputs"
)
