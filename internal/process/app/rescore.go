// StandaloneEvaluations are a worker's evaluations run outside any worker and server (a rescore).

package app

import (
	"context"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities/evaluation"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/evaldata"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// StandaloneEvaluations are a worker's evaluations run outside any worker
// and server (a rescore): checkpoints are read from src, which never
// changes (what the evaluation keeps goes to a store in scratch), and
// the evaluator runs under this host's runtime as cfg configures it, in
// scratch; no control model is ever evaluated. Close releases the
// runtime.
func StandaloneEvaluations(ctx context.Context, cfg *config.Config, src blob.Store, scratch string, logger *zap.Logger) (*evaluation.Evaluations, func(), error) {
	upper, err := blob.NewFS(filepath.Join(scratch, "store"))
	if err != nil {
		return nil, nil, err
	}
	engine := Engine(&blob.Overlay{Upper: upper, Lower: src}, cfg)
	local := *cfg
	// Its own work dir: a worker on this host reaps what it finds in its own.
	local.Host.WorkDir = filepath.Join(scratch, "work")
	// Its own host id: a worker on this host reaps only its own containers.
	ws, docker, err := openWorkspace(ctx, &local, engine, "rescore")
	if err != nil {
		return nil, nil, err
	}
	closeWS := func() {}
	if docker != nil {
		closeWS = func() { _ = docker.Close() }
	}
	return &evaluation.Evaluations{
		Runs:      host.Runs{Engine: engine},
		Host:      &host.Host{HostID: "rescore", WorkDir: local.WorkDir()},
		Sandbox:   &workspace.Sandbox{Workspace: ws, LogLimit: local.Agent.LogLimitMB << 20, Logger: logger},
		Data:      &evaldata.Dir{Root: local.Eval.DataDir},
		Logger:    logger,
		NoControl: true,
	}, closeWS, nil
}
