// ProvisionHost and ReleaseHost: hosts obtained for a run (static, Slurm, EC2).

package records

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/fleet/provision"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// ProvisionHost obtains a host for one attempt: a Slurm job or an EC2
// instance running a worker for it. A retried request finds the host it
// already obtained.
func (a *Fleet) ProvisionHost(ctx context.Context, req activities.HostRequest) (*activities.ProvisionedHost, error) {
	if a.Provisioner == nil || a.ProvisionerKind != req.Kind {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("provision.kind %s: this worker provisions %q (set provision.kind on the workers that start runs' hosts)", req.Kind, a.ProvisionerKind), activities.ErrBadTask, nil)
	}
	// An evaluation's job is not an attempt's: its role tells them apart.
	holder := runs.Holder{RunID: req.RunID, Role: req.Role, N: req.Attempt}
	job, err := a.Provisioner.Launch(ctx, provision.Request{Holder: holder, GPUType: req.GPUType, GPUCount: req.GPUCount, TimeLimit: req.TimeLimit})
	if err != nil {
		return nil, fmt.Errorf("provision: %w", err)
	}
	return &activities.ProvisionedHost{Kind: req.Kind, ID: job.ID, HostID: job.HostID, HostQueue: a.QueueOf(job.HostID)}, nil
}

// ReleaseHost gives a provisioned host back: its job is cancelled, its
// instance terminated (one already gone is not an error), and it returns
// once the host is gone, heartbeating while it waits.
func (a *Fleet) ReleaseHost(ctx context.Context, h activities.ProvisionedHost) error {
	if a.Provisioner == nil || h.Kind != a.ProvisionerKind {
		return nil
	}
	if activity.IsActivity(ctx) {
		hctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			for {
				activity.RecordHeartbeat(hctx)
				select {
				case <-hctx.Done():
					return
				case <-time.After(5 * time.Second):
				}
			}
		}()
	}
	return a.Provisioner.Stop(ctx, provision.Job{ID: h.ID, HostID: h.HostID})
}
