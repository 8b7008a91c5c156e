// checkpointer takes an attempt's checkpoints.

package attempt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/internal/fleet/metrics"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// checkpointer takes an attempt's checkpoints: periodic ones off the
// supervisor's path, one at a time (a failed one is reported and the
// agent keeps running), and the final or hand-back one in line. Each
// commit is announced to the run through the notifier.
type checkpointer struct {
	ws     workspace.Workspace
	engine *checkpoint.Engine
	at     *workspace.Attempt
	seq    int
	prev   *checkpoint.Manifest
	keep   int
	// marks are the curve's, in agent seconds: retention spares the
	// checkpoints next to them.
	marks []float64
	notes *notifier
	// holdFinal: the final commit is returned, not signalled (the
	// attempt's result carries it, AgentInput.LastInResult).
	holdFinal bool
	log       *zap.Logger
	running   chan struct{}
	failed    int // consecutive failures, touched by one save at a time
	// fenced ends the attempt when a later one has taken the run over.
	fenced func(error)
	live   *metrics.Attempt // records each checkpoint (nil: nowhere)
	// truncated fails the attempt when a checkpoint met the engine's
	// bound on entries between two measurements of the workspace.
	truncated func(why string)
	// added is told what each commit holds beyond the last (nil: no one).
	added func(ctx context.Context, prev, m *checkpoint.Manifest)
}

// wait waits for a periodic checkpoint in flight.
func (c *checkpointer) wait() {
	if c.running != nil {
		<-c.running
		c.running = nil
	}
}

// start begins a periodic checkpoint unless one is still uploading.
func (c *checkpointer) start(ctx context.Context, agentSeconds float64) {
	if c.running != nil {
		select {
		case <-c.running:
			c.running = nil
		default:
			return
		}
	}
	ch := make(chan struct{})
	c.running = ch
	go func() {
		defer close(ch)
		if _, err := c.save(ctx, agentSeconds, nil); err != nil {
			if c.superseded(err) {
				return
			}
			c.failed++
			c.log.Warn("checkpoint failed; the agent keeps running", zap.Int("consecutive", c.failed), zap.Error(err))
			c.notes.send(activities.SignalCheckpointFailed, activities.CheckpointFailure{Consecutive: c.failed, Error: err.Error(), At: time.Now().UTC(), From: c.at.N})
			return
		}
		c.failed = 0
	}()
}

// save takes one checkpoint; end is how the agent ended, on the final one.
func (c *checkpointer) save(ctx context.Context, agentSeconds float64, end *checkpoint.Ending) (*activities.CheckpointRef, error) {
	start := time.Now()
	ref, err := c.take(ctx, agentSeconds, end)
	if err != nil {
		c.live.Checkpoint(time.Since(start), end != nil, time.Time{}, 0, 0, err)
		return nil, err
	}
	c.live.Checkpoint(time.Since(start), end != nil, ref.At, ref.Bytes, ref.NewBytes, nil)
	return ref, nil
}

// take snapshots the workspace (the engine commits its manifest), prunes
// old checkpoints and announces the new one to the run.
func (c *checkpointer) take(ctx context.Context, agentSeconds float64, end *checkpoint.Ending) (*activities.CheckpointRef, error) {
	final := end != nil
	snap := func() (*checkpoint.Manifest, error) {
		return c.ws.Snapshot(ctx, c.at, checkpoint.Meta{RunID: c.at.RunID, Seq: c.seq, Attempt: c.at.N, AgentSeconds: agentSeconds, Final: final, Ending: end}, c.prev)
	}
	m, err := snap()
	// Another attempt took the number (a zombie whose commit landed after
	// this attempt's fence): number on past every manifest in the store,
	// superseded ones included. A zombie commits at most once more after
	// a fence, so a few tries settle it.
	var taken *checkpoint.SeqTakenError
	for try := 0; try < 3 && errors.As(err, &taken); try++ {
		last, lerr := c.engine.LastSeq(ctx, c.at.RunID)
		if lerr != nil {
			return nil, fmt.Errorf("%w (and the last number: %v)", err, lerr)
		}
		c.log.Warn("sequence number taken by another attempt; numbering on", zap.Int("seq", c.seq), zap.Int("by_attempt", taken.Attempt), zap.Int("next", last+1))
		c.seq = max(c.seq, last) + 1
		m, err = snap()
	}
	if err != nil {
		return nil, err
	}
	if len(m.Unsettled) > 0 {
		c.log.Warn("files kept changing while checkpointed: they hold their previous version, or are left out if new",
			zap.Int("seq", m.Seq), zap.Strings("files", m.Unsettled))
	}
	if m.Truncated && c.truncated != nil {
		c.truncated(fmt.Sprintf("checkpoint #%d leaves out what the agent made: %s", m.Seq, host.IncompleteWhy(m)))
	}
	if c.keep > 0 {
		if n, err := c.engine.Prune(ctx, c.at.RunID, c.keep, c.marks...); err != nil {
			c.log.Warn("retention", zap.Error(err))
		} else if n > 0 {
			c.log.Debug("retention dropped old checkpoints", zap.Int("manifests", n))
		}
	}
	ref := activities.CheckpointRef{Seq: m.Seq, Attempt: c.at.N, AgentSeconds: agentSeconds, At: m.CreatedAt, Files: len(m.Files), Bytes: m.Bytes, NewBytes: m.NewBytes, Final: final, Ending: end,
		From: c.at.N}
	if c.added != nil {
		c.added(ctx, c.prev, m)
	}
	c.prev = m
	c.seq++
	if !final || !c.holdFinal {
		c.notes.send(activities.SignalCheckpoint, ref)
	}
	c.log.Info("checkpoint committed", zap.Int("seq", ref.Seq), zap.Float64("agent_s", agentSeconds), zap.Int64("new_bytes", m.NewBytes))
	return &ref, nil
}

// superseded tells whether err is the store refusing a fenced attempt,
// and then ends the attempt.
func (c *checkpointer) superseded(err error) bool {
	var f *checkpoint.FencedError
	if !errors.As(err, &f) {
		return false
	}
	if c.fenced != nil {
		c.fenced(err)
	}
	return true
}

// final retries the last checkpoint with backoff until it commits: the
// agent has ended, and only this checkpoint keeps its work.
func (c *checkpointer) final(ctx context.Context, used float64, end *checkpoint.Ending) (*activities.CheckpointRef, error) {
	delay := time.Second
	for {
		ref, err := c.save(ctx, used, end)
		if err == nil {
			return ref, nil
		}
		if c.superseded(err) {
			return nil, err
		}
		c.log.Warn("final checkpoint failed; retrying", zap.Duration("in", delay), zap.Error(err))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("final checkpoint: %w (gave up: %v)", err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// notifier sends an attempt's signals to its run one at a time, in the
// order they were sent, each retried until it is delivered: the workflow
// sees checkpoints in commit order. flush waits until all sent so far are
// delivered, so an attempt never ends before its checkpoints reach the run.
type notifier struct {
	deliver func(ctx context.Context, name string, arg any) error
	log     *zap.Logger
	queue   chan notice
	pending sync.WaitGroup
}

type notice struct {
	name string
	arg  any
}

// Retry pacing of a signal the server did not take (it may be down).
const (
	signalTimeout  = 10 * time.Second
	signalMaxDelay = 5 * time.Second
)

func newNotifier(ctx context.Context, deliver func(context.Context, string, any) error, log *zap.Logger) *notifier {
	n := &notifier{deliver: deliver, log: log, queue: make(chan notice, 64)}
	go n.run(ctx)
	return n
}

func (n *notifier) send(name string, arg any) {
	n.pending.Add(1)
	n.queue <- notice{name, arg}
}

func (n *notifier) run(ctx context.Context) {
	for nt := range n.queue {
		delay := 200 * time.Millisecond
		for ctx.Err() == nil {
			sctx, cancel := context.WithTimeout(ctx, signalTimeout)
			err := n.deliver(sctx, nt.name, nt.arg)
			cancel()
			if err == nil {
				break
			}
			n.log.Debug("signal not delivered yet", zap.String("signal", nt.name), zap.Error(err))
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
			delay = min(2*delay, signalMaxDelay)
		}
		n.pending.Done()
	}
}

// flush waits until every signal sent so far is delivered (or ctx ends).
func (n *notifier) flush(ctx context.Context) error {
	done := make(chan struct{})
	go func() { n.pending.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("signals to the run not delivered: %w", ctx.Err())
	}
}

// close stops the sender once everything sent is delivered or abandoned.
func (n *notifier) close() { close(n.queue) }
