// Set is a worker's activities by concern, each receiver holding only what its activities use.

package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/fleet/gpu"
	"github.com/mlrb/mlrb/internal/fleet/metrics"
	"github.com/mlrb/mlrb/internal/fleet/provision"
	"github.com/mlrb/mlrb/internal/run/gpucost"
	"github.com/mlrb/mlrb/internal/sandbox/attach"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/scoring/evaldata"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

// Set is a worker's activities by concern, each receiver holding only
// what its activities use: Tasks resolve tasks and agents, Records keep
// what runs leave in the store, Leases hand out this host's GPU slots,
// Fleet obtains hosts, and Attempts and Evaluations run agents and
// evaluators in the host's Sandbox they share. The catalogue in workflows
// names each activity by its receiver's method.
type Set struct {
	Tasks       *Tasks
	Records     *Records
	Leases      *Leases
	Fleet       *Fleet
	Attempts    *Attempts
	Evaluations *Evaluations
}

// Tasks resolves what runs and benchmarks run.
type Tasks struct {
	Catalog *tasks.Catalog
	// Store is where this worker's runs keep their work (named in each
	// resolved task).
	Store blob.Store
	// Images tells an image's digest (the runtime's workspace).
	Images interface {
		Digest(ctx context.Context, image string) (string, error)
	}
	// Data is where the tasks' evaluation data lie (nil: none here).
	Data *evaldata.Dir
}

// Records keeps what runs and benchmarks leave in the store: the
// checkpoints a fork starts from, results, anchors, leaderboards and
// resume plans.
type Records struct {
	Catalog *tasks.Catalog
	Engine  *checkpoint.Engine
	// Client asks runs whether they ended (AwaitRuns).
	Client client.Client
	// MinExperiment is how long a process runs to be an experiment.
	MinExperiment time.Duration
	// GPUPrices costs the GPU time of the results stored (nil: not costed).
	GPUPrices *gpucost.Table
}

// Leases hands out this host's GPU slots.
type Leases struct {
	Host
	// Client tells whether a lease's owner has ended (nil: leases wait
	// out their TTL).
	Client client.Client
}

// Fleet obtains hosts for provisioned runs.
type Fleet struct {
	// Provisioner obtains hosts (nil: provision.kind static);
	// ProvisionerKind names it.
	Provisioner     provision.Provider
	ProvisionerKind string
	// QueueOf names a host's task queue.
	QueueOf func(hostID string) string
}

// Attempts runs agents: one attempt of a run per RunAgent.
type Attempts struct {
	Sandbox *Sandbox
	Host    *Host
	Runs    Runs
	// Client signals checkpoint commits to the run's workflow and
	// carries heartbeats.
	Client client.Client
	Logger *zap.Logger
	// Metrics records checkpoints and running attempts (nil: nothing is
	// recorded).
	Metrics *metrics.Metrics
	// Rooms are people's attempts on this host, for the attach server
	// (nil: people cannot attach here).
	Rooms *attach.Rooms
}

// live heartbeats an attempt (liveness).
func (a *Attempts) live(ctx context.Context, lease *Lease) (context.Context, *liveness, error) {
	return pulse{host: a.Host, client: a.Client, logger: a.Logger}.live(ctx, lease)
}

// Evaluations scores models: a run's final one and its curve's marks.
type Evaluations struct {
	Sandbox *Sandbox
	Host    *Host
	Runs    Runs
	// Client carries heartbeats (nil: the SDK's).
	Client client.Client
	Logger *zap.Logger
	// Metrics records evaluations (nil: nothing is recorded).
	Metrics *metrics.Metrics
	// Progress is told an evaluation's progress where it runs outside a
	// worker (a rescore), in place of heartbeats (nil: not told).
	Progress func(Heartbeat)
	// NoControl: a failed evaluation runs no control model (a rescore:
	// its answer is the same either way, and a control is a model no one
	// signed).
	NoControl bool
}

// live heartbeats an evaluation (liveness).
func (a *Evaluations) live(ctx context.Context, lease *Lease) (context.Context, *liveness, error) {
	return pulse{host: a.Host, client: a.Client, progress: a.Progress, logger: a.Logger}.live(ctx, lease)
}

// Runs is where runs' checkpoints live.
type Runs struct {
	Engine *checkpoint.Engine
	// Keep is how many checkpoints per run retention keeps (plus finals).
	Keep int
}

// Host is the machine the worker runs on: its name and queue, its GPU
// pool and its work disk.
type Host struct {
	HostID    string
	HostQueue string
	GPUType   string
	GPUs      *gpu.Pool
	WorkDir   string
	// Observe is how agents' processes and GPUs are sampled here.
	Observe observe.Options
}
