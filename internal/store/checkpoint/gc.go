// Retention and garbage collection of checkpoints, under a lock.

package checkpoint

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// GCOptions tune a collection.
type GCOptions struct {
	// Grace spares unreferenced chunks younger than this.
	Grace  time.Duration
	DryRun bool
}

// GCReport says what a collection found and did.
type GCReport struct {
	Manifests    int   `json:"manifests"`
	Chunks       int   `json:"chunks"`
	Referenced   int   `json:"referenced"`
	Deleted      int   `json:"deleted"`
	DeletedBytes int64 `json:"deleted_bytes"`
	TooYoung     int   `json:"too_young"`
	DryRun       bool  `json:"dry_run"`
}

// GC deletes chunks no committed manifest references.
func (e *Engine) GC(ctx context.Context, o GCOptions) (*GCReport, error) {
	l, err := e.acquire(ctx, gcLockPrefix, saveLockPrefix, "gc", true)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	defer l.release(ctx)
	rep := &GCReport{DryRun: o.DryRun}
	objs, err := e.Store.List(ctx, "runs/")
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	ref := map[string]bool{}
	for _, obj := range objs {
		if !strings.Contains(obj.Key, "/checkpoints/") || !strings.HasSuffix(obj.Key, ".json") {
			continue
		}
		m, err := e.loadKey(ctx, obj.Key)
		if err != nil {
			return nil, fmt.Errorf("gc: %w", err)
		}
		rep.Manifests++
		for _, f := range m.Files {
			for _, h := range f.Stored() {
				ref[h] = true
			}
		}
	}
	rep.Referenced = len(ref)
	chunks, err := e.Store.List(ctx, "chunks/")
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	rep.Chunks = len(chunks)
	// A chunk's age is the store's to tell: a save in flight uploaded it
	// by the store's clock, whatever this host's says.
	now, err := e.storeNow(ctx)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	if !o.DryRun {
		// Before the first delete: every engine's cache of stored chunks,
		// in any process, is stale from here on (see Engine.syncKnown).
		if err := e.Store.Put(ctx, gcGenerationKey, strings.NewReader(newID())); err != nil {
			return rep, fmt.Errorf("gc: mark a new generation: %w", err)
		}
	}
	for _, c := range chunks {
		h := path.Base(c.Key)
		if ref[h] {
			continue
		}
		if now.Sub(c.ModTime) < o.Grace {
			rep.TooYoung++
			continue
		}
		rep.Deleted++
		rep.DeletedBytes += c.Size
		if !o.DryRun {
			if err := e.Store.Delete(ctx, c.Key); err != nil {
				return rep, fmt.Errorf("gc: %w", err)
			}
		}
	}
	return rep, nil
}

// Prune deletes what superseded attempts committed, keeps a run's last
// keep checkpoints, its final ones and, for each of marks (agent
// seconds: the curve's), the last at or before it and the first after
// it, and deletes the other manifests; their chunks become garbage for GC.
func (e *Engine) Prune(ctx context.Context, runID string, keep int, marks ...float64) (int, error) {
	keys, err := e.manifestKeys(ctx, runID)
	if err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	fs, err := e.fences(ctx, runID)
	if err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	if len(keys) <= keep && !slices.ContainsFunc(fs, func(f Fence) bool { return f.Attempt > 1 }) {
		return 0, nil // nothing to drop, and no manifest to read
	}
	ms, err := e.List(ctx, runID)
	if err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	var own []*Manifest
	var drop []*Manifest
	for _, m := range ms {
		if m.SupersededBy != 0 {
			drop = append(drop, m)
		} else {
			own = append(own, m)
		}
	}
	if len(own) > keep {
		spared := NearMarks(own, marks)
		for _, m := range own[:len(own)-keep] {
			if !m.Final && !spared[m.Seq] {
				drop = append(drop, m)
			}
		}
	}
	for i, m := range drop {
		if err := e.Store.Delete(ctx, ManifestKey(runID, m.Seq)); err != nil {
			return i, fmt.Errorf("prune %s: %w", runID, err)
		}
	}
	return len(drop), nil
}
