// AnchorWorkflow: a task's anchors measured.

package workflows

import (
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/tasks"
)

// AnchorWorkflowName is the type of an anchor measurement.
const AnchorWorkflowName = "AnchorWorkflow"

// AnchorInput is an anchor measurement: one run of an agent per seed on a
// task; the mean of their scores is the task's anchor of Role.
type AnchorInput struct {
	Task  string
	Role  string
	Seeds []int64
	// Run is each run's input but for its task and seed.
	Run RunInput
}

// AnchorID is the id of the measurement of task's anchor of role: one at
// a time, so that a command interrupted and given again attaches to the
// measurement under way rather than start another.
func AnchorID(task, role string) string { return "anchor-" + task + "-" + role }

// AnchorRunID is the id of a measurement's run of seed.
func AnchorRunID(anchorID string, seed int64) string {
	return anchorID + "-s" + strconv.FormatInt(seed, 10)
}

// AnchorWorkflow runs the measurement's runs, at once, as children with
// ids of their seeds; when every one is scored, it stores the mean with
// the runs, agent, budget and evaluator that produced it.
func AnchorWorkflow(ctx workflow.Context, in AnchorInput) (*tasks.Anchor, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	futures := make([]workflow.ChildWorkflowFuture, len(in.Seeds))
	for i, seed := range in.Seeds {
		run := in.Run
		run.Task, run.Seed = in.Task, seed
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: AnchorRunID(id, seed), TypedSearchAttributes: RunSearchAttributes(run)})
		futures[i] = workflow.ExecuteChildWorkflow(cctx, RunWorkflowName, run)
	}
	results := make([]runs.Result, len(futures))
	for i, f := range futures {
		if err := f.Get(ctx, &results[i]); err != nil {
			return nil, fmt.Errorf("run %s: %w", AnchorRunID(id, in.Seeds[i]), err)
		}
		if r := results[i]; r.Score == nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("run %s ended %s without a score (%s): no anchor", r.RunID, r.Outcome, r.Reason), "NoAnchor", nil)
		}
	}
	a := anchorOf(results, workflow.Now(ctx))
	if err := storeAnchor.call(ctx, callArgs{}, activities.StoreAnchorInput{Task: in.Task, Role: in.Role, Anchor: a}); err != nil {
		return nil, err
	}
	return &a, nil
}

// anchorOf is the anchor of scored results: their mean, with where it
// comes from.
func anchorOf(results []runs.Result, now time.Time) tasks.Anchor {
	first := results[0]
	a := tasks.Anchor{RunID: first.RunID, Agent: first.Agent, TimeLimit: tasks.Duration(time.Duration(first.TimeLimitS * float64(time.Second))),
		Evaluator: first.EvaluatorImage, Measured: now.UTC().Truncate(time.Second)}
	if a.Evaluator == "" {
		a.Evaluator = "unrecorded (a worker from before evaluators were recorded)"
	}
	for _, r := range results {
		a.Score += *r.Score / float64(len(results))
		if len(results) > 1 {
			a.Runs = append(a.Runs, r.RunID)
		}
	}
	return a
}
