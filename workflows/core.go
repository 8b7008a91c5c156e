// runCore is all a part of a run sees of it.

package workflows

import (
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// runCore is all a part of a run sees of it: what is set once (its
// input, policy, code paths, and its task once resolved), its status and
// its last checkpoint. A part reaches another only as a neighbour it was
// built with (newRunState), never through the run.
type runCore struct {
	in   RunInput
	pol  Policy
	env  runEnv
	spec activities.ResolvedTask
	st   Status
	last *activities.CheckpointRef
}

// timeLimit is the run's budget before extensions: the task's, unless the
// run overrides it (zero until the task is resolved).
func (c *runCore) timeLimit() time.Duration {
	if c.in.TimeLimit > 0 {
		return c.in.TimeLimit
	}
	return c.spec.Spec.TimeLimit.D()
}

// interval is the run's checkpoint interval: its task's, when shorter
// than its policy's, but never shorter than its budget allows.
func (c *runCore) interval() time.Duration {
	granted := time.Duration(c.st.Budget.GrantedS() * float64(time.Second))
	return c.spec.Spec.Interval(c.pol.CheckpointInterval, granted/MaxCheckpointsPerRun)
}

// image is the image the run's attempts run: an image agent's by the
// digest its resolution pinned, else as its input names it.
func (c *runCore) image() string {
	if c.spec.AgentImage != "" {
		return c.spec.AgentImage
	}
	return c.in.Image
}

// metrics is the run's handler, tagged with its task and agent.
func (c *runCore) metrics(ctx workflow.Context) client.MetricsHandler {
	return workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"task": c.in.Task, "agent": c.in.Agent})
}

func (c *runCore) nextSeq() int {
	if c.last == nil {
		return 1
	}
	return c.last.Seq + 1
}

func (c *runCore) setPhase(ctx workflow.Context, phase runs.Phase) {
	if c.st.Phase == phase {
		return
	}
	c.st.Phase = phase
	if err := workflow.UpsertTypedSearchAttributes(ctx, SAPhase.ValueSet(string(phase))); err != nil {
		workflow.GetLogger(ctx).Warn("upsert phase", "error", err)
	}
}

// superseded tells whether a signal comes from an attempt other than the
// current one (a zombie: its worker lost, its agent still running); such
// signals never move the run. From 0 is a signal sent before attempts
// said who they were.
func (c *runCore) superseded(ctx workflow.Context, from int) bool {
	if from == 0 || from == c.st.Attempt {
		return false
	}
	workflow.GetLogger(ctx).Warn("ignored a signal from a superseded attempt", "from", from, "attempt", c.st.Attempt)
	return true
}
