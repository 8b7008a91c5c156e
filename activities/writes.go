package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/store/blob"
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
	return fmt.Sprintf("%ssandbox/writes-%04d.json", blob.RunPrefix(runID), attempt)
}

// runtimeMade are what the runtime itself puts in a container's
// filesystem: its init, its name and resolver files, the kernel's trees.
var runtimeMade = []string{"/sbin/docker-init", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/.dockerenv", "/dev", "/proc", "/sys"}

// maxWrites bounds the paths kept: an agent can write a million.
const maxWrites = 200

// keepWrites records what the agent's container wrote outside its
// mounts, where the runtime can tell (a container; a process cannot).
func (a *Attempts) keepWrites(ctx context.Context, in *AgentInput, h runtime.Handle, mounts []string, log *zap.Logger) {
	d, ok := h.(runtime.Differ)
	if !ok {
		return
	}
	changed, err := d.Changes(ctx)
	if err != nil {
		log.Warn("the container's writes outside its workspace are not known", zap.Error(err))
		return
	}
	w := AttemptWrites{Attempt: in.Attempt, Outside: []string{}}
	mounts = append(mounts, runtimeMade...)
	for i, p := range changed {
		// A directory listed because something under it changed is not
		// itself a write: the leaves are (changed is sorted).
		if ancestorOrMount(p, mounts) || i+1 < len(changed) && strings.HasPrefix(changed[i+1], strings.TrimSuffix(p, "/")+"/") {
			continue
		}
		if len(w.Outside) == maxWrites {
			w.More++
			continue
		}
		w.Outside = append(w.Outside, p)
	}
	slices.Sort(w.Outside)
	b, _ := json.Marshal(w)
	if err := a.Runs.Engine.Store.Put(ctx, WritesKey(in.RunID, in.Attempt), bytes.NewReader(b)); err != nil {
		log.Warn("the container's writes outside its workspace are not kept", zap.Error(err))
	}
}

// ancestorOrMount: p is a mount point or a directory on the way to one
// (made for the mount, not written by the agent).
func ancestorOrMount(p string, mounts []string) bool {
	for _, m := range mounts {
		if p == m || strings.HasPrefix(m, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

// bindTargets are the container paths of Docker binds (host:container[:opts]).
func bindTargets(binds []string) []string {
	out := make([]string, 0, len(binds))
	for _, b := range binds {
		if parts := strings.Split(b, ":"); len(parts) >= 2 {
			out = append(out, parts[1])
		}
	}
	return out
}
