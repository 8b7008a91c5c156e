package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/mlrb/mlrb/internal/provision"
)

// ProvisionKindSlurm is provision.kind slurm.
const ProvisionKindSlurm = "slurm"

// ProvisionHost obtains a host for one attempt: a Slurm job running a
// worker for it. The job's host id is known before submission, and a
// retried request finds the job it already submitted.
func (a *Activities) ProvisionHost(ctx context.Context, req HostRequest) (*ProvisionedHost, error) {
	if a.Slurm == nil {
		return nil, temporal.NewNonRetryableApplicationError("provision.kind slurm: this worker has no Slurm provisioner (set provision.kind: slurm in its config)", ErrBadTask, nil)
	}
	attempt := req.Attempt
	key := req.RunID
	if req.Role != "" {
		key += "#" + req.Role // an evaluation's job is not an attempt's
	}
	job, err := a.Slurm.Submit(ctx, provision.Request{RunID: key, Attempt: attempt, GPUType: req.GPUType, GPUCount: req.GPUCount, TimeLimit: req.TimeLimit})
	if err != nil {
		return nil, fmt.Errorf("provision: %w", err)
	}
	return &ProvisionedHost{Kind: ProvisionKindSlurm, ID: job.ID, HostID: job.HostID, HostQueue: a.QueueOf(job.HostID)}, nil
}

// ReleaseHost gives a provisioned host back: its job is cancelled (a job
// already ended is not an error).
func (a *Activities) ReleaseHost(ctx context.Context, h ProvisionedHost) error {
	if a.Slurm == nil || h.Kind != ProvisionKindSlurm {
		return nil
	}
	return a.Slurm.Cancel(ctx, h.ID)
}
