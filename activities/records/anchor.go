// StoreAnchor: an anchor measurement kept with its task.

package records

import (
	"context"

	"go.temporal.io/sdk/activity"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/results/anchors"
	"github.com/mlrb/mlrb/internal/results/controls"
)

// StoreAnchor keeps a measured anchor in the blob store, where every
// leaderboard of the task reads it (over the catalog's). A baseline
// measured here also gives the task's evaluator its control: the model
// of the anchor's first run, which that evaluator scored (controls.Set).
func (a *Records) StoreAnchor(ctx context.Context, in activities.StoreAnchorInput) error {
	if err := anchors.Put(ctx, a.Engine.Store, in.Task, in.Role, in.Anchor); err != nil {
		return err
	}
	if in.Role != anchors.Baseline || in.Anchor.RunID == "" || a.Catalog == nil {
		return nil
	}
	spec, err := a.Catalog.Get(in.Task)
	if err != nil || spec.Reference != nil {
		return nil // a mini task's control is its untrained reference model
	}
	if _, err := controls.Set(ctx, a.Engine, spec, in.Anchor.RunID, "the baseline anchor"); err != nil {
		activity.GetLogger(ctx).Warn("the baseline anchor's model is no control", "task", in.Task, "run", in.Anchor.RunID, "error", err)
	}
	return nil
}
