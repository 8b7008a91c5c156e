// An attempt's agent from its definition: image, command, state paths and LLM side.

package attempt

import (
	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/tasks"
)

// agentImage is the image an attempt runs: an image agent's (pinned by
// digest when its run resolved it), "" (the workspace's own) for the
// built-in agents.
func agentImage(in activities.AgentInput) string {
	def := definition(in)
	if def.Builtin != "" {
		return ""
	}
	if in.Image != "" {
		return in.Image
	}
	return def.Image
}

// definition is the attempt's agent.
func definition(in activities.AgentInput) agents.Definition {
	return agents.Of(in.AgentDef, in.Agent, in.Image, in.LLMProvider)
}

// agentView is the task as its agent is told it: without the curve's
// marks (and their command), so that it cannot know when its checkpoints
// will be scored and have its best on disk then.
func agentView(t tasks.Spec) tasks.Spec {
	t.Evaluation.Curve = nil
	return t
}
