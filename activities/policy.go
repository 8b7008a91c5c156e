// AttemptPolicy is the sandbox an attempt's agent ran in, kept with the run (runs/<run>/sandbox/attempt-N.json) and signed in its bundle.

package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/store/keys"
)

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

// keepPolicy stores the policy the agent's task is about to start under.
func (a *Attempts) keepPolicy(ctx context.Context, in *AgentInput, spec runtime.TaskSpec, secrets []string) error {
	lim := a.Sandbox.workspaceLimits(&in.Task)
	p := AttemptPolicy{Attempt: in.Attempt, Sandbox: a.Sandbox.Workspace.Policy(spec), EgressAllow: []string{}, LLMBudget: in.LLMBudget,
		WorkspaceLimit: lim.bytes, WorkspaceEntries: lim.entries, Secrets: secrets}
	if a.Sandbox.Egress != nil && a.Sandbox.Egress.Allow != nil {
		p.EgressAllow = a.Sandbox.Egress.Allow
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the sandbox policy: %w", err)
	}
	if err := a.Runs.Engine.Store.Put(ctx, PolicyKey(in.RunID, in.Attempt), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("keep the sandbox policy: %w", err)
	}
	return nil
}
