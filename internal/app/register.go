package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/blob"
	"github.com/mlrb/mlrb/internal/gpu"
	"github.com/mlrb/mlrb/internal/hosts"
	"github.com/mlrb/mlrb/internal/provision"
)

// lockWorkDir takes the work dir for this worker: two workers on one dir
// would sweep and reap each other's agents.
func lockWorkDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("host.work_dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "worker.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("host.work_dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &config.Error{Msg: fmt.Sprintf("host.work_dir: %s is in use by another worker; give each worker its own host.work_dir and host.id", dir)}
		}
		return nil, fmt.Errorf("host.work_dir: lock: %w", err)
	}
	return f, nil
}

// pollerFresh is how recently a poller must have polled to count as a
// live worker: a long poll lasts up to about a minute.
const pollerFresh = 90 * time.Second

// checkHostFree refuses a host.id that another worker polls: two machines
// on one host queue would run each other's attempts on the wrong GPUs.
func checkHostFree(ctx context.Context, c client.Client, cfg *config.Config, queue, identity string) error {
	resp, err := c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		return fmt.Errorf("describe %s: %w", queue, err)
	}
	for _, p := range resp.GetPollers() {
		age := time.Since(p.GetLastAccessTime().AsTime())
		if p.GetIdentity() != identity && age < pollerFresh {
			return &config.Error{Msg: fmt.Sprintf("host.id: %q is already polled by another worker (%s, %s ago); give this worker its own host.id (MLRB_HOST_ID), or stop that one and wait %s",
				cfg.Host.ID, p.GetIdentity(), age.Round(time.Second), pollerFresh)}
		}
	}
	return nil
}

// publishEvery paces the host record while nothing changes: how stale
// `starter hosts` may be about a host that went away.
const publishEvery = 15 * time.Second

// register publishes this host's record to the store: at once on every
// lease change, and every publishEvery, until ctx ends, when the record
// says the host stopped.
type register struct {
	store   blob.Store
	rec     hosts.Record
	pool    *gpu.Pool
	changed chan struct{}
	log     *zap.Logger
	done    chan struct{}
	idle    time.Time // since when no lease is held
}

func newRegister(store blob.Store, rec hosts.Record, log *zap.Logger) *register {
	return &register{store: store, rec: rec, changed: make(chan struct{}, 1), log: log, done: make(chan struct{})}
}

// touch asks for a publication; it never blocks (the pool calls it under
// its lock).
func (r *register) touch() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *register) run(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(publishEvery)
	defer t.Stop()
	for {
		r.publish(context.Background(), ctx.Err() != nil)
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-r.changed:
		case <-t.C:
		}
	}
}

func (r *register) publish(ctx context.Context, stopped bool) {
	rec := r.rec
	rec.Leases, rec.SeenAt, rec.Stopped = r.pool.Leases(), time.Now().UTC(), stopped
	switch {
	case len(rec.Leases) > 0:
		r.idle = time.Time{}
	case r.idle.IsZero():
		r.idle = rec.SeenAt
	}
	rec.IdleSince = r.idle
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := hosts.Put(pctx, r.store, rec); err != nil {
		r.log.Warn("host record not published", zap.Error(err))
	}
}

// reapJobs gives back, every interval, the provisioned hosts (Slurm jobs,
// EC2 instances) whose run has ended (terminated, reset, crashed between
// provisioning and giving back) or whose attempt the run has given up on
// (its provisioning answer lost): a host never outlives its use by more
// than an interval.
func reapJobs(ctx context.Context, s provision.Provider, c client.Client, every time.Duration, log *zap.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		jobs, err := s.List(ctx)
		if err != nil {
			log.Warn("reaper: list jobs", zap.Error(err))
			continue
		}
		for _, j := range jobs {
			key, attempt, _ := provision.ParseJobName(j.Name)
			runID, _, isEval := strings.Cut(key, "#")
			n := strconv.Itoa(attempt)
			if isEval {
				n = "" // an evaluation's number is not an attempt's
			}
			// The containers' fence asks the same question of a run.
			why := stale(ctx, c, runID, n)
			if why == "" {
				continue
			}
			log.Warn("reaper: giving back a host its run no longer uses", zap.String("job", j.ID), zap.String("run", runID), zap.String("why", why))
			if err := s.Stop(ctx, j.ID); err != nil {
				log.Warn("reaper: cancel", zap.String("job", j.ID), zap.Error(err))
			}
		}
	}
}

// openProvider is the host provider provision.kind asks for (nil: static).
func openProvider(ctx context.Context, cfg *config.Config) (provision.Provider, error) {
	switch cfg.Provision.Kind {
	case activities.ProvisionKindSlurm:
		return slurmProvisioner(cfg)
	case activities.ProvisionKindEC2:
		e := cfg.Provision.EC2
		types, err := cfg.Provision.InstanceTypes()
		if err != nil {
			return nil, &config.Error{Msg: err.Error()}
		}
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(e.Region))
		if err != nil {
			return nil, fmt.Errorf("provision.ec2: %w", err)
		}
		client := ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
			if e.Endpoint != "" {
				o.BaseEndpoint = aws.String(e.Endpoint)
			}
		})
		return &provision.EC2{Client: client, InstanceTypes: types, AMI: e.AMI, SubnetID: e.SubnetID, SecurityGroups: e.SecurityGroups,
			Spot: e.Spot, Worker: e.Worker}, nil
	}
	return nil, nil
}
