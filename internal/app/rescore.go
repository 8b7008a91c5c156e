package app

import (
	"context"
	"fmt"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/blob"
	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/runtime"
)

// StandaloneEvaluations are a worker's evaluations run outside any worker
// and server (a rescore): checkpoints are read from src, which never
// changes (what the evaluation keeps goes to a store in scratch), and
// the evaluator runs under this host's runtime as cfg configures it, in
// scratch. Close releases the runtime.
func StandaloneEvaluations(ctx context.Context, cfg *config.Config, src blob.Store, scratch string, logger *zap.Logger) (*activities.Evaluations, func(), error) {
	upper, err := blob.NewFS(filepath.Join(scratch, "store"))
	if err != nil {
		return nil, nil, err
	}
	engine := checkpoint.New(&blob.Overlay{Upper: upper, Lower: src}, checkpoint.Options{ChunkSize: cfg.Checkpoint.ChunkSize, Parallel: cfg.Storage.Parallel})
	local := *cfg
	// Its own work dir: a worker on this host reaps what it finds in its own.
	local.Host.WorkDir = filepath.Join(scratch, "work")
	var ws activities.Workspace
	closeWS := func() {}
	if local.Host.Runtime == config.RuntimeDocker {
		docker, err := runtime.NewDocker(ctx, "rescore")
		if err != nil {
			return nil, nil, err
		}
		ws, closeWS = containerWorkspace(&local, docker, engine), func() { _ = docker.Close() }
	} else {
		self, err := AgentBinary(&local)
		if err != nil {
			return nil, nil, err
		}
		p, err := runtime.NewProcess(filepath.Join(local.WorkDir(), "procs"))
		if err != nil {
			return nil, nil, fmt.Errorf("process runtime: %w", err)
		}
		ws = &activities.DirWorkspace{Process: p, Engine: engine, Self: self}
	}
	runner := &activities.Runner{
		Runs:    activities.Runs{Engine: engine},
		Host:    activities.Host{HostID: "rescore", WorkDir: local.WorkDir()},
		Sandbox: activities.Sandbox{Workspace: ws, LogLimit: local.Agent.LogLimitMB << 20},
		Logger:  logger,
	}
	return &activities.Evaluations{Runner: runner}, closeWS, nil
}
