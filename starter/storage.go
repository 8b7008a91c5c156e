// Opening a run's store and checkpoint engine.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// Where a run's checkpoints and logs are read from.

// runEngine opens the checkpoint engine over the store that holds runID's
// checkpoints (see runStore).
func runEngine(g *globals, runID string) (*checkpoint.Engine, error) {
	cfg, err := g.config()
	if err != nil {
		return nil, err
	}
	store, err := runStore(g, runID, func(s blob.Store) (bool, error) {
		_, err := app.Engine(s, cfg).Latest(g.ctx, runID)
		if errors.Is(err, checkpoint.ErrNoCheckpoint) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	return app.Engine(store, cfg), nil
}

// runStore opens the blob store that holds runID's checkpoints and logs:
// the configured one when it has them (has), else the store the run
// itself names (its status, from the workers that ran it). A worker
// started with another --state-dir writes elsewhere; that store is read
// when it is a directory here, and named, with how to point the starter
// at it, when it is not.
func runStore(g *globals, runID string, has func(blob.Store) (bool, error)) (blob.Store, error) {
	cfg, err := g.config()
	if err != nil {
		return nil, err
	}
	store, err := g.store()
	if err != nil {
		return nil, err
	}
	if ok, err := has(store); ok || err != nil {
		return store, err
	}
	return followStore(g, cfg, store, runID, storeOfRun(g.ctx, cfg, runID))
}

// followStore is the store a run names (where, from its status) when it
// is not this starter's: read when it is a directory here (and kept as
// the store every later read of this command uses), refused naming both
// when it is not. "" (the run could not say) keeps this starter's.
func followStore(g *globals, cfg *config.Config, store blob.Store, runID, where string) (blob.Store, error) {
	if where == "" || where == store.String() {
		return store, nil
	}
	if dir, ok := strings.CutPrefix(where, blob.FSPrefix); ok {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			fmt.Fprintf(g.errOut, "run %s keeps its checkpoints and results in %s (this starter's store is %s): reading that\n", runID, where, store)
			s, err := blob.NewFS(dir)
			if err != nil {
				return nil, err
			}
			g.blobs = s
			return s, nil
		}
	}
	return nil, cli.Usagef("run %s keeps its checkpoints and results in %s, but this starter reads %s: point storage.* (or --state-dir) at the run's store", runID, where, store)
}

// storeOfRun asks the run where its workers keep its checkpoints; ""
// when the server, the run or an answer is not to be had.
func storeOfRun(ctx context.Context, cfg *config.Config, runID string) string {
	qctx, cancel := context.WithTimeout(ctx, cfg.Temporal.ConnectTimeout)
	defer cancel()
	c, err := app.Dial(qctx, cfg, zap.NewNop())
	if err != nil {
		return ""
	}
	defer c.Close()
	st, err := queryStatus(qctx, c, runID)
	if err != nil {
		return ""
	}
	return st.Store
}

// noCheckpoints says a run has no checkpoint in store, naming the store.
func noCheckpoints(runID string, e *checkpoint.Engine) error {
	return cli.Usagef("run %q has no committed checkpoint in the store %s (a worker with another --state-dir or storage.* writes elsewhere: point the starter at the same one)", runID, e.Store)
}
