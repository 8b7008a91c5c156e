// Evaluations scores models: a run's final one and its curve's marks.

package evaluation

import (
	"context"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/internal/fleet/metrics"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/evaldata"
)

// Evaluations scores models: a run's final one and its curve's marks.
type Evaluations struct {
	Sandbox *workspace.Sandbox
	// Data is where the data sets tasks' evaluators read lie
	// (eval.data_dir; nil: none here).
	Data *evaldata.Dir
	Host *host.Host
	Runs host.Runs
	// Client carries heartbeats (nil: the SDK's).
	Client client.Client
	Logger *zap.Logger
	// Metrics records evaluations (nil: nothing is recorded).
	Metrics *metrics.Metrics
	// Progress is told an evaluation's progress where it runs outside a
	// worker (a rescore), in place of heartbeats (nil: not told).
	Progress func(activities.Heartbeat)
	// NoControl: a failed evaluation runs no control model (a rescore:
	// its answer is the same either way, and a control is a model no one
	// signed).
	NoControl bool
}

// live heartbeats an evaluation (liveness).
func (a *Evaluations) live(ctx context.Context, lease *activities.Lease) (context.Context, *host.Liveness, error) {
	return host.Pulse{Host: a.Host, Client: a.Client, Progress: a.Progress, Logger: a.Logger}.Live(ctx, lease)
}
