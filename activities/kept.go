// What an attempt leaves beside its checkpoints (its writes, its sandbox's policy), and the wire's errors.

package activities

import (
	"errors"
	"fmt"

	"github.com/mlrb/mlrb/internal/run/llm"
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

// AttemptPolicy is the sandbox an attempt's agent ran in, kept with the
// run (runs/<run>/sandbox/attempt-N.json) and signed in its bundle: the
// runtime's isolation and limits, the door's allow-list, the budgets
// and the names (never the values) of the secrets it was given.
type AttemptPolicy struct {
	Attempt          int            `json:"attempt"`
	Sandbox          runtime.Policy `json:"sandbox"`
	EgressAllow      []string       `json:"egress_allow"`
	LLMBudget        llm.Budget     `json:"llm_budget,omitzero"`
	WorkspaceLimit   int64          `json:"workspace_limit_bytes,omitempty"`
	WorkspaceEntries int64          `json:"workspace_max_entries,omitempty"`
	Secrets          []string       `json:"secret_names,omitempty"`
}

// PolicyKey is where an attempt's policy is kept.
func PolicyKey(runID string, attempt int) string {
	return keys.Policy(runID, attempt)
}

// ErrNoSpace: the host's disk cannot hold what an attempt must restore;
// the attempt is an infra loss and the run leases again.
const ErrNoSpace = "NoSpace"

// ErrFenced: this attempt may no longer act for its run.
var ErrFenced = errors.New("attempt fenced")

// String is the step as an operator reads it: "restoring 4.1 of 19.8 GiB".
func (p Heartbeat) String() string {
	switch {
	case p.Step == "":
		return ""
	case p.TotalBytes > 0:
		return fmt.Sprintf("%s %.1f of %.1f GiB", p.Step, gib(p.DoneBytes), gib(p.TotalBytes))
	case p.DoneBytes > 0:
		return fmt.Sprintf("%s %.1f GiB", p.Step, gib(p.DoneBytes))
	}
	return p.Step
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }
