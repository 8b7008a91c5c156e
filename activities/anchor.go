package activities

import (
	"context"

	"github.com/mlrb/mlrb/internal/anchors"
	"github.com/mlrb/mlrb/tasks"
)

// StoreAnchorName is the wire name of StoreAnchor.
const StoreAnchorName = "StoreAnchor"

// StoreAnchorInput is a measured anchor: task's of role.
type StoreAnchorInput struct {
	Task   string
	Role   string
	Anchor tasks.Anchor
}

// StoreAnchor keeps a measured anchor in the blob store, where every
// leaderboard of the task reads it (over the catalog's).
func (a *Records) StoreAnchor(ctx context.Context, in StoreAnchorInput) error {
	return anchors.Put(ctx, a.Engine.Store, in.Task, in.Role, in.Anchor)
}
