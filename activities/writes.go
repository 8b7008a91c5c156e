// What an attempt wrote outside its mounts, and the reasons an attempt ended.

package activities

import (
	"bytes"
	"context"
	"encoding/json"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/store/keys"
)

// KilledAfterGrace opens the reason of an attempt whose agent was killed
// at the hard deadline: it did not exit within agent.grace of SIGTERM.
const KilledAfterGrace = "killed at the hard deadline, agent.grace after SIGTERM"

// AttemptWrites are the paths an attempt's agent wrote outside its
// workspace (its container's own layer: the checkpointed paths are
// mounts, and never in it), kept with the run
// (runs/<run>/sandbox/writes-N.json): what a crash loses, since no
// checkpoint holds it.
type AttemptWrites struct {
	Attempt int      `json:"attempt"`
	Outside []string `json:"outside"`
	// More counts the paths past the ones listed.
	More int `json:"more,omitempty"`
}

// WritesKey is where an attempt's writes outside its workspace are kept.
func WritesKey(runID string, attempt int) string {
	return keys.Writes(runID, attempt)
}

// maxWrites bounds the paths kept: an agent can write a million.
const maxWrites = 200

// keepWrites records what the agent's container wrote outside its
// mounts, where the runtime can tell (a container; a process cannot).
func (a *Attempts) keepWrites(ctx context.Context, in *AgentInput, h runtime.Handle, log *zap.Logger) {
	d, ok := h.(runtime.Differ)
	if !ok {
		return
	}
	changed, err := d.Changes(ctx)
	if err != nil {
		log.Warn("the container's writes outside its workspace are not known", zap.Error(err))
		return
	}
	w := AttemptWrites{Attempt: in.Attempt, Outside: append([]string{}, changed[:min(len(changed), maxWrites)]...), More: max(0, len(changed)-maxWrites)}
	b, _ := json.Marshal(w)
	if err := a.Runs.Engine.Store.Put(ctx, WritesKey(in.RunID, in.Attempt), bytes.NewReader(b)); err != nil {
		log.Warn("the container's writes outside its workspace are not kept", zap.Error(err))
	}
}
