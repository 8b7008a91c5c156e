// Self-fencing: tasks of runs that have moved on are stopped.

package app

import (
	"context"
	"errors"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/workflows"
)

// staleTask says, from the run's workflow, why a task of run (and
// attempt, for agents) must go: the run ended, or the attempt was
// superseded; "" when it is live or the answer is not known.
func staleTask(c client.Client) runtime.Stale {
	return func(ctx context.Context, run, attempt string) string { return stale(ctx, c, run, attempt) }
}

func stale(ctx context.Context, c client.Client, run, attempt string) string {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := c.DescribeWorkflowExecution(qctx, run, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return "no such run"
	}
	if err != nil {
		return "" // the server is away: do nothing rash
	}
	if d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return "the run has ended"
	}
	if attempt == "" {
		return ""
	}
	v, err := c.QueryWorkflow(qctx, run, "", workflows.QueryStatus)
	if err != nil {
		return ""
	}
	var st workflows.Status
	if v.Get(&st) != nil {
		return ""
	}
	if n, err := strconv.Atoi(attempt); err == nil && n < st.Attempt {
		return "attempt " + attempt + " was superseded by attempt " + strconv.Itoa(st.Attempt)
	}
	return ""
}
