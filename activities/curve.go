package activities

import (
	"context"
	"fmt"

	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/runs"
)

// MarksInput asks which checkpoints a run's curve scores.
type MarksInput struct {
	RunID string
	// Marks are in agent seconds, ascending.
	Marks []float64
	// Final is the checkpoint the run's final evaluation scored: no
	// later one counts (a zombie's never does).
	Final CheckpointRef
	// SlackS is how long after a mark a checkpoint may be taken and still
	// stand for it (the checkpoint interval: the one due at the mark may
	// commit late); a mark with none at or before it, nor within the
	// slack after it, had no checkpoint yet.
	SlackS float64
}

// PickMarks picks, for each mark, the run's committed checkpoint nearest
// to it in agent time (the earlier on a tie; a later one only within the
// slack), from the store's own manifests: a superseded attempt's are not
// the run's.
func (a *Evaluations) PickMarks(ctx context.Context, in MarksInput) ([]runs.Mark, error) {
	ms, err := a.Engine.List(ctx, in.RunID)
	if err != nil {
		return nil, fmt.Errorf("checkpoints of %s: %w", in.RunID, err)
	}
	var own []*checkpoint.Manifest
	for _, m := range ms {
		if m.SupersededBy == 0 && m.Seq <= in.Final.Seq {
			own = append(own, m)
		}
	}
	return nearest(own, in.Marks, in.SlackS), nil
}

// nearest is PickMarks' choice over own, in commit order
// (checkpoint.PickMark: the rule retention keeps to).
func nearest(own []*checkpoint.Manifest, marks []float64, slack float64) []runs.Mark {
	out := make([]runs.Mark, len(marks))
	for i, at := range marks {
		out[i] = runs.Mark{AtS: at}
		if m := checkpoint.PickMark(own, at, slack); m != nil {
			out[i].Seq, out[i].AgentS = m.Seq, m.AgentSeconds
		} else {
			out[i].NoModel = "no checkpoint yet"
		}
	}
	return out
}
