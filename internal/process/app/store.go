// OpenStore opens the configured blob store.

package app

import (
	"context"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// OpenStore opens the configured blob store.
func OpenStore(ctx context.Context, cfg *config.Config) (blob.Store, error) {
	if cfg.Storage.Kind == config.StorageS3 {
		s := cfg.Storage.S3
		return blob.NewS3(ctx, blob.S3Options{
			Bucket: s.Bucket, Prefix: s.Prefix, Region: s.Region, Endpoint: s.Endpoint, PathStyle: s.PathStyle,
			AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey, MaxAttempts: s.MaxAttempts,
		})
	}
	return blob.NewFS(cfg.BlobRoot())
}

// OpenEngine opens the checkpoint engine over the configured store.
func OpenEngine(ctx context.Context, cfg *config.Config) (*checkpoint.Engine, error) {
	store, err := OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return Engine(store, cfg), nil
}

// Engine is the checkpoint engine over store with the options config
// gives: the one way every command and the worker open it, so that a
// reader and the writer agree on chunks, packs and bounds.
func Engine(store blob.Store, cfg *config.Config) *checkpoint.Engine {
	return checkpoint.New(store, checkpoint.Options{ChunkSize: cfg.Checkpoint.ChunkSize, Parallel: cfg.Storage.Parallel, Exclude: cfg.Checkpoint.Exclude,
		MaxEntries: cfg.Agent.WorkspaceMaxEntries, NoPacks: !cfg.Checkpoint.PackSmallFiles})
}
