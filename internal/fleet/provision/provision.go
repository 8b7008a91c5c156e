// The Provider interface: hosts obtained and given back (static, Slurm, EC2).

// Package provision obtains GPU hosts for attempts and gives them back:
// each provisioned host is a worker started for one attempt, on a host
// queue named for it, so that the attempt's lease and agent go there.
package provision

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// Provider is one way of obtaining hosts (provision.kind).
type Provider interface {
	// Launch obtains the attempt's host; a retried launch finds the host
	// the first one obtained instead of obtaining another.
	Launch(ctx context.Context, r Request) (Job, error)
	// Stop gives a host back, returning once it is gone; one already
	// gone is not an error.
	Stop(ctx context.Context, j Job) error
	// List lists the hosts this provider obtained that still exist.
	List(ctx context.Context) ([]Job, error)
}

// Sweeper is a provider that leaves files on the worker's host for its
// hosts (Slurm's credentials): Sweep removes those of hosts not in jobs,
// as List found them.
type Sweeper interface {
	Sweep(jobs []Job) error
}

// Request is what an attempt needs.
type Request struct {
	// Holder is the attempt or evaluation the host serves.
	Holder   runs.Holder
	GPUType  string // the task's, e.g. A100-40GB
	GPUCount int
	// TimeLimit is how long the host may live: the budget left and a
	// margin for restore, final checkpoint and evaluation.
	TimeLimit time.Duration
}

// Job is one provisioned host running a worker for one attempt: a
// Slurm job or an EC2 instance. Name carries the run and attempt.
type Job struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	HostID string `json:"host_id"`
	State  string `json:"state,omitempty"`
}

// Options is what provision.kind and its keys ask for.
type Options struct {
	// Kind is "static" (no provider: workers someone started), "slurm" or
	// "ec2".
	Kind string
	// Deployment names this deployment (its namespace and task queue):
	// its jobs and instances carry it, and List sees no other's.
	Deployment string
	Slurm      SlurmOptions
	EC2        EC2Options
}

// SlurmOptions configure Slurm jobs (provision.slurm.*).
type SlurmOptions struct {
	// Worker is the job's command; empty: this process's own binary.
	Worker         []string
	Partition      string
	WorkDir        string
	CommandTimeout time.Duration
}

// EC2Options configure EC2 instances (provision.ec2.*).
type EC2Options struct {
	Region, Endpoint, AMI, SubnetID string
	SecurityGroups                  []string
	InstanceTypes                   map[string]string
	Spot                            bool
	Worker                          string
}

// Open is the provider o.Kind names; nil for static hosts.
func Open(ctx context.Context, o Options) (Provider, error) {
	switch o.Kind {
	case "slurm":
		cmd := o.Slurm.Worker
		if len(cmd) == 0 {
			self, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("provision.slurm.worker: find own binary: %w", err)
			}
			cmd = []string{self}
		}
		if err := os.MkdirAll(o.Slurm.WorkDir, 0o755); err != nil {
			return nil, fmt.Errorf("provision.slurm.work_dir: %w", err)
		}
		return &Slurm{Worker: cmd, Partition: o.Slurm.Partition, WorkDir: o.Slurm.WorkDir, Deployment: o.Deployment, Timeout: o.Slurm.CommandTimeout}, nil
	case "ec2":
		e := o.EC2
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(e.Region))
		if err != nil {
			return nil, fmt.Errorf("provision.ec2: %w", err)
		}
		client := ec2.NewFromConfig(awsCfg, func(eo *ec2.Options) {
			if e.Endpoint != "" {
				eo.BaseEndpoint = aws.String(e.Endpoint)
			}
		})
		return &EC2{Client: client, InstanceTypes: e.InstanceTypes, AMI: e.AMI, SubnetID: e.SubnetID, SecurityGroups: e.SecurityGroups,
			Spot: e.Spot, Worker: e.Worker, Deployment: o.Deployment}, nil
	}
	return nil, nil
}
