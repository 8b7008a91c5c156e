// The resume note an attempt gets: what the last one left running and where it stopped.

package attempt

import (
	"cmp"
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// maxResumedProcs bounds the processes a resume note names.
const maxResumedProcs = 64

// writeResumeNote writes a resumed attempt's note (contract.ResumeNote)
// in its control dir: the checkpoint restored, the agent time the run
// lost (the run's own account of its attempts), and from the last
// attempt's observation how long the run was down and what was running
// when it died. An observation the store cannot give leaves those out,
// never the note.
func (a *Attempts) writeResumeNote(ctx context.Context, in activities.AgentInput, at *workspace.Attempt, prev *checkpoint.Manifest, log *zap.Logger) error {
	now := time.Now()
	n := contract.ResumeNote{Attempt: in.Attempt,
		Checkpoint: contract.ResumedCheckpoint{Seq: prev.Seq, Attempt: prev.Attempt, AgentS: prev.AgentSeconds, At: prev.Created()}}
	n.DownS = max(0, now.Sub(prev.Created()).Seconds())
	n.LostAgentS = in.Budget.LostS
	obs, err := observe.Load(ctx, a.Runs.Engine.Store, in.RunID)
	if err != nil {
		log.Warn("the resume note names no processes", zap.Error(err))
	}
	if last := lastObservation(obs, in.Attempt); last != nil {
		fillFromObservation(&n, last, now)
	}
	return contract.WriteResumeNote(at.Control(), n)
}

// lastObservation is the observation of the latest attempt before
// attempt (nil: none).
func lastObservation(obs []*observe.Observation, attempt int) *observe.Observation {
	var last *observe.Observation
	for _, o := range obs {
		if o.Attempt < attempt && (last == nil || o.Attempt > last.Attempt) {
			last = o
		}
	}
	return last
}

// fillFromObservation puts what the last attempt's observation says in n.
func fillFromObservation(n *contract.ResumeNote, o *observe.Observation, now time.Time) {
	n.LastAttempt, n.LastEnded = o.Attempt, o.Ended
	if n.LastEnded == "" {
		n.LastEnded = "lost"
	}
	if o.End.IsZero() {
		return
	}
	n.LastSeen = o.End
	if o.End.After(n.Checkpoint.At) {
		n.DownS = max(0, now.Sub(o.End).Seconds())
	}
	agentAt := func(t time.Time) float64 { return o.StartAgentS + t.Sub(o.Start).Seconds() }
	for _, p := range o.Procs {
		if p.End.IsZero() && p.Gone.IsZero() {
			n.Running = append(n.Running, contract.ResumedProcess{PID: p.PID, Command: p.Command, StartAgentS: agentAt(p.Start), Root: p.Root})
		}
	}
	slices.SortStableFunc(n.Running, func(a, b contract.ResumedProcess) int { return cmp.Compare(a.StartAgentS, b.StartAgentS) })
	n.Running = n.Running[:min(len(n.Running), maxResumedProcs)]
}
