// The fleet's run counts for the Prometheus endpoint.

package app

import (
	"context"
	"fmt"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/fleet/metrics"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/workflows"
)

// fleetCounts counts the namespace's runs by phase (those under way) and
// by outcome (those ended), from the MlrbPhase and MlrbOutcome search
// attributes the runs keep up to date: what `starter status` shows, for
// every run at once.
func fleetCounts(c client.Client, namespace string) *metrics.Fleet {
	base := fmt.Sprintf("WorkflowType = '%s'", workflows.RunWorkflowName)
	var running, ended []metrics.Count
	for _, p := range runs.Phases() {
		running = append(running, metrics.Count{Value: string(p),
			Query: fmt.Sprintf("%s AND ExecutionStatus = 'Running' AND %s = '%s'", base, workflows.SAPhase.GetName(), p)})
	}
	for _, o := range runs.Outcomes() {
		ended = append(ended, metrics.Count{Value: string(o),
			Query: fmt.Sprintf("%s AND ExecutionStatus != 'Running' AND %s = '%s'", base, workflows.SAOutcome.GetName(), o)})
	}
	return metrics.NewFleet(func(ctx context.Context, q string) (int64, error) {
		resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: q})
		if err != nil {
			return 0, fmt.Errorf("count %q: %w", q, err)
		}
		return resp.GetCount(), nil
	}, running, ended)
}
