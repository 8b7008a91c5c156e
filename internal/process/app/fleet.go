// The host's record in the fleet register, kept fresh.

package app

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/fleet/gpu"
	"github.com/mlrb/mlrb/internal/fleet/hosts"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// publishEvery paces the host record while nothing changes: how stale
// `starter hosts` may be about a host that went away.
const publishEvery = 15 * time.Second

// fleetRecord publishes this host's record to the store: at once on every
// lease change, and every publishEvery, until ctx ends, when the record
// says the host stopped.
type fleetRecord struct {
	store   blob.Store
	rec     hosts.Record
	pool    *gpu.Pool
	changed chan struct{}
	log     *zap.Logger
	done    chan struct{}
	idle    time.Time // since when no lease is held
	// dedicated: a host provisioned for one attempt, whose record goes
	// with it.
	dedicated bool
}

func newFleetRecord(store blob.Store, rec hosts.Record, log *zap.Logger) *fleetRecord {
	return &fleetRecord{store: store, rec: rec, changed: make(chan struct{}, 1), log: log, done: make(chan struct{})}
}

// touch asks for a publication; it never blocks (the pool calls it under
// its lock).
func (r *fleetRecord) touch() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *fleetRecord) run(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(publishEvery)
	defer t.Stop()
	for {
		if ctx.Err() != nil && r.dedicated {
			// A host provisioned for one attempt is gone for good: its
			// record would only pile up (audit #24).
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := hosts.Delete(dctx, r.store, r.rec.ID); err != nil {
				r.log.Warn("host record not removed", zap.Error(err))
			}
			cancel()
			return
		}
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

func (r *fleetRecord) publish(ctx context.Context, stopped bool) {
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
