// intake takes in, for the run's whole life, the checkpoint commits and failures and the LLM ledgers its attempts signal, and keeps the run's timeline.

package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// intake takes in, for the run's whole life, the checkpoint commits and
// failures and the LLM ledgers its attempts signal, and keeps the run's
// timeline of checkpoints for its result.
type intake struct {
	c     *runCore
	usage *usageState
	// tookOver is the attempt loop's ledger correction for a checkpoint
	// it had not heard of (attemptLoop.tookOver).
	tookOver    func(c activities.CheckpointRef, usedBefore float64)
	ckCh        workflow.ReceiveChannel
	checkpoints []runs.CheckpointInfo
}

// receive listens to the signals, from setup on.
func (k *intake) receive(ctx workflow.Context) {
	k.ckCh = workflow.GetSignalChannel(ctx, activities.SignalCheckpoint)
	failCh := workflow.GetSignalChannel(ctx, activities.SignalCheckpointFailed)
	k.usage.ch = workflow.GetSignalChannel(ctx, activities.SignalUsage)
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(k.ckCh, func(ch workflow.ReceiveChannel, _ bool) {
			var ref activities.CheckpointRef
			ch.Receive(ctx, &ref)
			k.accept(ctx, ref)
		})
		sel.AddReceive(failCh, func(ch workflow.ReceiveChannel, _ bool) {
			var f activities.CheckpointFailure
			ch.Receive(ctx, &f)
			if k.c.superseded(ctx, f.From) {
				return
			}
			k.c.st.CheckpointFailures, k.c.st.CheckpointError = f.Consecutive, f.Error
		})
		sel.AddReceive(k.usage.ch, func(ch workflow.ReceiveChannel, _ bool) {
			var rep activities.UsageReport
			ch.Receive(ctx, &rep)
			k.usage.take(rep)
		})
		for {
			sel.Select(ctx)
		}
	})
}

// accept takes a committed checkpoint in. Checkpoints come in commit
// order; one seen again (a signal retried after a lost answer) is
// ignored, and so is one from a superseded attempt.
func (k *intake) accept(ctx workflow.Context, c activities.CheckpointRef) {
	st := &k.c.st
	if k.c.last != nil && c.Seq <= k.c.last.Seq || k.c.superseded(ctx, c.From) {
		return
	}
	st.Checkpoints++
	st.CheckpointFailures, st.CheckpointError = 0, ""
	if c.RunID == "" { // a fork's inherited checkpoint is not its own
		k.checkpoints = append(k.checkpoints, runs.CheckpointInfo{Seq: c.Seq, Attempt: c.Attempt, At: c.At, AgentS: c.AgentSeconds,
			Files: c.Files, Bytes: c.Bytes, NewBytes: c.NewBytes, Final: c.Final})
	}
	cp := c
	k.c.last = &cp
	k.tookOver(c, st.Budget.UsedS)
	st.Budget.Preserve(c.AgentSeconds)
}

// drain takes in the checkpoint signals already received, then what the
// attempt's result carries (its final checkpoint and ledger,
// AgentInput.LastInResult; nil when it failed): an attempt delivers all
// of its own before it ends, so after it ended the run knows its last
// checkpoint. Taking them from the result adds no command, so runs
// recorded when they came as signals replay the same.
//
// Signals that came in the same workflow task as the attempt's end may
// already be handed to the signal goroutine's selector, whose callback
// runs only when this coroutine yields: it yields once first (no
// command), so they are taken in while the attempt is still current.
func (k *intake) drain(ctx workflow.Context, out *activities.AgentResult) {
	yielded := false
	_ = workflow.Await(ctx, func() bool {
		done := yielded
		yielded = true
		return done
	})
	var ref activities.CheckpointRef
	for k.ckCh.ReceiveAsync(&ref) {
		k.accept(ctx, ref)
		ref = activities.CheckpointRef{}
	}
	k.usage.drain()
	if out == nil {
		return
	}
	if out.Usage != nil {
		k.usage.take(*out.Usage)
	}
	if out.Final != nil {
		k.accept(ctx, *out.Final)
	}
}

// result: every checkpoint the run accepted.
func (k *intake) result(res *runs.Result) { res.CheckpointLog = k.checkpoints }
