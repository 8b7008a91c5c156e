package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
)

// A lean run's evaluations share one slot: the agent's, when its attempt
// ended on a static host and gave nothing back, else the final
// evaluation's. The final evaluation and the curve's marks run on it one
// after another, with no lease and release between them; it is given
// back before the run waits for an operator and when the run ends.
// Provisioned hosts keep a lease per step: a host's lifetime is sized
// for the step it was provisioned for.

// keepForScoring keeps lease, held since leased, for the run's
// evaluations; false when the run does not share slots (not lean, or a
// provisioned host).
func (r *runState) keepForScoring(lease activities.Lease, leased time.Time) bool {
	if !r.lean || r.st.Host != nil {
		return false
	}
	r.scoring = &heldLease{lease: lease, leased: leased}
	return true
}

// scoringLease is the shared slot, if the run holds one.
func (r *runState) scoringLease() *activities.Lease {
	if r.scoring == nil {
		return nil
	}
	l := r.scoring.lease
	return &l
}

// releaseScoring gives the shared slot back and books the time it was
// held.
func (r *runState) releaseScoring(ctx workflow.Context) {
	h := r.scoring
	if h == nil {
		return
	}
	r.scoring = nil
	r.release(ctx, h.lease)
	r.held(ctx, h.leased)
}
