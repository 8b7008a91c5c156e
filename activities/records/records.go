// Tasks and Records: tasks and agents resolved, and what runs leave in the store.

package records

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/fleet/provision"
	"github.com/mlrb/mlrb/internal/run/gpucost"
	"github.com/mlrb/mlrb/internal/scoring/evaldata"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

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

// Fleet obtains hosts for provisioned runs.
type Fleet struct {
	// Provisioner obtains hosts (nil: provision.kind static);
	// ProvisionerKind names it.
	Provisioner     provision.Provider
	ProvisionerKind string
	// QueueOf names a host's task queue.
	QueueOf func(hostID string) string
}

// ResolveTask loads the spec from this worker's catalog and hashes it.
func (a *Tasks) ResolveTask(ctx context.Context, in activities.ResolveInput) (*activities.ResolvedTask, error) {
	spec, err := a.Catalog.Get(in.Task)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrBadTask, nil)
	}
	def := agents.Of(in.AgentDef, in.Agent, in.Image, "")
	if err := def.CheckTask(spec.ID, spec.Suite == "mini"); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrBadTask, nil)
	}
	if _, err := a.Data.Check(spec); err != nil {
		// The operator's setup, refused before a GPU is leased.
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrBadTask, nil)
	}
	res := &activities.ResolvedTask{Spec: *spec, Hash: spec.Hash(), Store: a.Store.String()}
	if def.Image != "" {
		image := def.Image
		if in.Image != "" {
			image = in.Image // pinned when its benchmark started
		}
		d, err := a.Images.Digest(ctx, image)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("agent %s: %v", def.Name, err), activities.ErrBadTask, nil)
		}
		res.AgentImage = d
	}
	return res, nil
}

// ResolveAgents pins each image agent's image to its digest, when a
// benchmark starts: its runs, started over hours or days, all run the
// image its agents were resolved to, wherever their tags move meanwhile.
// An image this worker cannot find is a bad input, named with its agent.
func (a *Tasks) ResolveAgents(ctx context.Context, defs []agents.Definition) (map[string]string, error) {
	out := map[string]string{}
	for _, d := range defs {
		if d.Image == "" {
			continue
		}
		digest, err := a.Images.Digest(ctx, d.Image)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("agent %s: image %s: %v (build or load it on the workers)", d.Name, d.Image, err), activities.ErrBadTask, nil)
		}
		out[d.Name] = digest
	}
	return out, nil
}

// LoadCheckpoint describes a committed checkpoint of a run, for a fork or
// a continued run.
func (a *Records) LoadCheckpoint(ctx context.Context, src activities.CheckpointSource) (*activities.CheckpointRef, error) {
	var m *checkpoint.Manifest
	var err error
	if src.Seq == 0 {
		m, err = a.Engine.Latest(ctx, src.RunID)
	} else {
		m, err = a.Engine.Load(ctx, src.RunID, src.Seq)
	}
	last, ferr := a.Engine.LastAttempt(ctx, src.RunID)
	if ferr != nil {
		return nil, fmt.Errorf("checkpoint of %s: %w", src.RunID, ferr)
	}
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint) && src.IfAny && last > 0:
		return &activities.CheckpointRef{LastAttempt: last}, nil
	case errors.Is(err, checkpoint.ErrNoCheckpoint) && src.IfAny:
		return nil, nil
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrBadTask, err)
	case err != nil:
		return nil, fmt.Errorf("checkpoint of %s: %w", src.RunID, err) // the store may be back on the next try
	}
	return &activities.CheckpointRef{RunID: src.RunID, Seq: m.Seq, Attempt: m.Attempt, AgentSeconds: m.AgentSeconds, At: m.CreatedAt, Files: len(m.Files), Bytes: m.Bytes,
		Final: m.Final, Ending: m.Ending, LastAttempt: last}, nil
}
