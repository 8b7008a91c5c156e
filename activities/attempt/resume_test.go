package attempt

import (
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
)

// TestResumeNoteFromTheLastAttempt: the note names the latest attempt
// before this one, how it ended, when it was last seen, and the
// processes alive then, oldest first; gone ones are left out.
func TestResumeNoteFromTheLastAttempt(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	obs := []*observe.Observation{
		{Attempt: 1, Start: t0, End: t0.Add(time.Hour), Ended: "exited"},
		{Attempt: 2, Start: t0.Add(2 * time.Hour), StartAgentS: 3600, End: t0.Add(3 * time.Hour), Procs: []observe.Proc{
			{PID: 10, Root: true, Command: "/agent", Start: t0.Add(2 * time.Hour)},
			{PID: 30, Command: "python train.py --lr 3e-4", Start: t0.Add(2*time.Hour + 20*time.Minute)},
			{PID: 20, Command: "pip install x", Start: t0.Add(2*time.Hour + 5*time.Minute), End: t0.Add(2*time.Hour + 6*time.Minute)},
		}},
		{Attempt: 3}, // this attempt's own, if stored already
	}
	last := lastObservation(obs, 3)
	if last == nil || last.Attempt != 2 {
		t.Fatalf("last observation %+v", last)
	}
	n := contract.ResumeNote{Attempt: 3, Checkpoint: contract.ResumedCheckpoint{Seq: 9, AgentS: 6000, At: t0.Add(2*time.Hour + 50*time.Minute)}}
	fillFromObservation(&n, last, t0.Add(3*time.Hour+10*time.Minute))
	if n.LastAttempt != 2 || n.LastEnded != "lost" || !n.LastSeen.Equal(t0.Add(3*time.Hour)) || n.DownS != 600 {
		t.Fatalf("note %+v", n)
	}
	if len(n.Running) != 2 || n.Running[0].PID != 10 || !n.Running[0].Root || n.Running[1].PID != 30 || n.Running[1].StartAgentS != 3600+1200 {
		t.Fatalf("running %+v", n.Running)
	}
}
