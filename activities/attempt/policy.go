// AttemptPolicy is the sandbox an attempt's agent ran in, kept with the run (runs/<run>/sandbox/attempt-N.json) and signed in its bundle.

package attempt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
)

// keepPolicy stores the policy the agent's task is about to start under.
func (a *Attempts) keepPolicy(ctx context.Context, in *activities.AgentInput, spec runtime.TaskSpec, secrets []string) error {
	lim := a.Sandbox.WorkspaceLimits(&in.Task)
	p := activities.AttemptPolicy{Attempt: in.Attempt, Sandbox: a.Sandbox.Workspace.Policy(spec), EgressAllow: []string{}, LLMBudget: in.LLMBudget,
		WorkspaceLimit: lim.Bytes, WorkspaceEntries: lim.Entries, Secrets: secrets}
	if a.Sandbox.Egress != nil && a.Sandbox.Egress.Allow != nil {
		p.EgressAllow = a.Sandbox.Egress.Allow
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the sandbox policy: %w", err)
	}
	if err := a.Runs.Engine.Store.Put(ctx, activities.PolicyKey(in.RunID, in.Attempt), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("keep the sandbox policy: %w", err)
	}
	return nil
}
