// The host provider provision.kind names.

package app

import (
	"context"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/fleet/provision"
)

// openProvider is the host provider provision.kind asks for (nil: static).
func openProvider(ctx context.Context, cfg *config.Config) (provision.Provider, error) {
	types, err := cfg.Provision.InstanceTypes()
	if err != nil {
		return nil, &config.Error{Msg: err.Error()}
	}
	p, e := cfg.Provision.Slurm, cfg.Provision.EC2
	return provision.Open(ctx, provision.Options{Kind: string(cfg.Provision.Kind), Deployment: Deployment(cfg),
		Slurm: provision.SlurmOptions{Worker: p.Worker, Partition: p.Partition, WorkDir: cfg.SlurmWorkDir(), CommandTimeout: p.CommandTimeout},
		EC2: provision.EC2Options{Region: e.Region, Endpoint: e.Endpoint, AMI: e.AMI, SubnetID: e.SubnetID, SecurityGroups: e.SecurityGroups,
			InstanceTypes: types, Spot: e.Spot, Worker: e.Worker}})
}

// Deployment names this mlrb deployment where it shares a Slurm cluster or
// an AWS account with others: its Temporal namespace and task queue. Its
// jobs and instances carry it, and its reaper acts on no other's.
func Deployment(cfg *config.Config) string {
	return cfg.Temporal.Namespace + "/" + cfg.Temporal.TaskQueue
}
