package workflows

import (
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
)

// Figures the runs record through the SDK's metrics handler, which
// leaves out replays: each is recorded once, when it happens. Timers
// reach Prometheus as histograms named <name>_seconds.
const (
	MetricLeaseWait = "mlrb_lease_wait"   // wait for a slot, per lease granted
	MetricInfraWait = "mlrb_infra_wait"   // time a run waited on infrastructure, per booking
	MetricLost      = "mlrb_attempt_lost" // agent time past the last checkpoint, per lost attempt
)

// metrics is the run's handler, tagged with its task and agent.
func (r *runState) metrics(ctx workflow.Context) client.MetricsHandler {
	return workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"task": r.in.Task, "agent": r.in.Agent})
}

func seconds(s float64) time.Duration { return time.Duration(max(0, s) * float64(time.Second)) }
