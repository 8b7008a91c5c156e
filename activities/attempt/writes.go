// What an attempt wrote outside its mounts, and the reasons an attempt ended.

package attempt

import (
	"bytes"
	"context"
	"encoding/json"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
)

// maxWrites bounds the paths kept: an agent can write a million.
const maxWrites = 200

// keepWrites records what the agent's container wrote outside its
// mounts, where the runtime can tell (a container; a process cannot).
func (a *Attempts) keepWrites(ctx context.Context, in *activities.AgentInput, h runtime.Handle, log *zap.Logger) {
	d, ok := h.(runtime.Differ)
	if !ok {
		return
	}
	changed, err := d.Changes(ctx)
	if err != nil {
		log.Warn("the container's writes outside its workspace are not known", zap.Error(err))
		return
	}
	w := activities.AttemptWrites{Attempt: in.Attempt, Outside: append([]string{}, changed[:min(len(changed), maxWrites)]...), More: max(0, len(changed)-maxWrites)}
	b, _ := json.Marshal(w)
	if err := a.Runs.Engine.Store.Put(ctx, activities.WritesKey(in.RunID, in.Attempt), bytes.NewReader(b)); err != nil {
		log.Warn("the container's writes outside its workspace are not kept", zap.Error(err))
	}
}
