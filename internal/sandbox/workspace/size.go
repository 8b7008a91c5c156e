// The workspace's size watch: bytes and entries against the attempt's limits.

package workspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/mlrb/mlrb/internal/kit/every"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

// sizeEvery paces the workspace measurement: a walk costs a stat per
// file, so it runs beside the agent, never on the supervisor's path.
// layerEvery paces the writable layer's, and layerTimeout bounds the
// daemon's answer where the worker cannot walk the layer itself.
// maxFailedMeasures is how many measurements in a row may fail (a
// directory removed as it was listed, say) before the agent is stopped:
// a workspace the worker cannot measure is outside every limit.
const (
	sizeEvery         = 10 * time.Second
	layerEvery        = 30 * time.Second
	layerTimeout      = 20 * time.Second
	maxFailedMeasures = 6
)

// Limits are a workspace's: bytes and entries (0: none), and the
// setting the bytes' limit comes from (bytesFrom), for the agent's error.
type Limits struct {
	Bytes, Entries int64
	bytesFrom      string
}

// measure is one measurement of what an attempt holds on the host's
// disk: its workspace, and outside it (a container's writable layer).
type measure struct {
	outside func(context.Context) (int64, int64, error)
	layer   struct{ bytes, entries int64 }
	layerAt time.Time
	failed  int
}

// usage measures root, and the layer every layerEvery.
func (m *measure) usage(ctx context.Context, root string) (bytes, entries int64, err error) {
	bytes, entries, err = diskUsage(root)
	if err != nil {
		return 0, 0, err
	}
	if m.outside != nil && time.Since(m.layerAt) >= layerEvery {
		m.layerAt = time.Now()
		b, e, err := m.outside(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("writable layer: %w", err)
		}
		m.layer.bytes, m.layer.entries = b, e
	}
	return bytes + m.layer.bytes, entries + m.layer.entries, nil
}

// WatchSize starts measuring root every sizeEvery, and what the agent
// writes outside it (outside, if not nil: a container's writable layer)
// every layerEvery, until ctx ends or a limit is passed (allow is told).
func WatchSize(ctx context.Context, root string, lim Limits, outside func(context.Context) (int64, int64, error), allow *Allowance, log *zap.Logger) {
	m := &measure{outside: outside}
	stop := func(why string) bool {
		allow.Exceed(why)
		return false
	}
	go every.Tick(ctx, sizeEvery, func() bool {
		if lim.Bytes <= 0 && lim.Entries <= 0 {
			return false
		}
		used, entries, err := m.usage(ctx, root)
		var deep *unmeasurable
		switch {
		case errors.As(err, &deep):
			return stop(deep.Error())
		case err != nil && ctx.Err() != nil:
			return false
		case err != nil:
			if m.failed++; m.failed >= maxFailedMeasures {
				return stop(fmt.Sprintf("the workspace could not be measured %d times in a row (%v): what it holds is outside every limit", m.failed, err))
			}
			log.Debug("workspace size", zap.Error(err))
			return true
		}
		m.failed = 0
		if lim.Entries > 0 && entries > lim.Entries {
			return stop(fmt.Sprintf("workspace holds %d entries (%d of them in the container's own layer), over its limit agent.workspace_max_entries = %d (each is a line of every checkpoint's manifest, or an inode of the host's disk)", entries, m.layer.entries, lim.Entries))
		}
		if lim.Bytes <= 0 || used <= lim.Bytes {
			return true
		}
		return stop(fmt.Sprintf("workspace reached %.2f GiB (%.2f GiB of it outside the mounted paths, in the container's own layer), over its limit %s = %.2f GiB", float64(used)/(1<<30), float64(m.layer.bytes)/(1<<30), lim.bytesFrom, float64(lim.Bytes)/(1<<30)))
	})
}

// unmeasurable is a workspace the walk cannot measure whole: a directory
// nested past safefs.MaxDepth, or one it cannot enter. What lies below
// would be outside every bound, on the host's disk: the agent is stopped.
type unmeasurable struct {
	rel string
	err error
}

func (u *unmeasurable) Error() string {
	return fmt.Sprintf("the workspace cannot be measured whole (%v: %.80s…): what lies there is outside every limit", u.err, u.rel)
}

// minEntryBytes is what any entry is charged at least: an empty file
// takes no blocks but an inode and a directory entry, and a checkpoint
// lists it. A million empty files count 4 GiB against the limit.
const minEntryBytes = 4 << 10

// diskUsage is what root's entries cost against the workspace limit, and
// how many there are: a
// file's allocated blocks (as du counts them) or its apparent size,
// whichever is larger (a sparse file is read whole by a checkpoint),
// and never less than minEntryBytes; a file hardlinked twice counts its
// data once and minEntryBytes for its second name (a million links to
// one file are a million entries). The agent may be changing the tree: it is walked from
// descriptors (safefs.Dir.Walk), never through a link.
func diskUsage(root string) (total, entries int64, err error) {
	d, err := safefs.OpenDir(root)
	if err != nil {
		return 0, 0, fmt.Errorf("measure %s: %w", root, err)
	}
	defer func() { _ = d.Close() }()
	seen := map[[2]uint64]bool{}
	err = d.Walk(func(e safefs.Entry) error {
		if e.Err != nil {
			// Nothing below can be measured (nor checkpointed): never
			// left uncounted.
			return &unmeasurable{rel: e.Rel, err: e.Err}
		}
		entries++
		st := e.Stat
		if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			id := [2]uint64{st.Dev, st.Ino}
			if seen[id] {
				// Its data counts once; each further name is an entry a
				// checkpoint lists.
				total += minEntryBytes
				return nil
			}
			seen[id] = true
		}
		total += max(st.Blocks*512, st.Size, minEntryBytes)
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("measure %s: %w", root, err)
	}
	return total, entries, nil
}
