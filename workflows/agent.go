package workflows

import (
	"time"

	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// interval is the run's checkpoint interval: its task's, when shorter
// than its policy's, but never shorter than its budget allows.
func (r *runState) interval() time.Duration {
	granted := time.Duration(r.st.Budget.GrantedS() * float64(time.Second))
	return r.spec.Spec.Interval(r.pol.CheckpointInterval, granted/MaxCheckpointsPerRun)
}

// image is the image the run's attempts run: an image agent's by the
// digest its resolution pinned, else as its input names it.
func (r *runState) image() string {
	if r.spec.AgentImage != "" {
		return r.spec.AgentImage
	}
	return r.in.Image
}

// agentRef is what the result records of the run's agent.
func (r *runState) agentRef() *runs.AgentRef {
	digest := r.agentImage
	if digest == "" {
		digest = r.spec.AgentImage
	}
	ref := agents.Of(r.in.AgentDef, r.in.Agent, r.in.Image, r.in.LLMProvider).Ref(digest)
	return &ref
}
