package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/mlrb/mlrb/internal/every"
	"github.com/mlrb/mlrb/internal/safefs"
)

// sizeEvery paces the workspace measurement: a walk costs a stat per
// file, so it runs beside the agent, never on the supervisor's path.
// layerEvery paces the writable layer's (the daemon walks the layer).
const (
	sizeEvery  = 10 * time.Second
	layerEvery = 30 * time.Second
)

// sizeWatch measures a workspace on disk against a limit, in the
// background, until its context ends.
type sizeWatch struct {
	mu  sync.Mutex
	why string
}

// stop records why the workspace broke its limits; the watch ends.
func (w *sizeWatch) stop(why string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.why = why
	return false
}

// limits are a workspace's: bytes and entries (0: none).
type limits struct{ bytes, entries int64 }

// watchSize starts measuring root every sizeEvery, and what the agent
// writes outside it (outside, if not nil: a container's writable layer)
// every layerEvery.
func watchSize(ctx context.Context, root string, lim limits, outside func(context.Context) (int64, error), log *zap.Logger) *sizeWatch {
	w := &sizeWatch{}
	var layer int64
	var layerAt time.Time
	go every.Tick(ctx, sizeEvery, func() bool {
		used, entries, err := diskUsage(root)
		var deep *unmeasurable
		if errors.As(err, &deep) {
			return w.stop(deep.Error())
		}
		if err != nil {
			log.Debug("workspace size", zap.Error(err))
			return true
		}
		if lim.entries > 0 && entries > lim.entries {
			return w.stop(fmt.Sprintf("workspace holds %d entries, over its limit agent.workspace_max_entries = %d (each is a line of every checkpoint's manifest)", entries, lim.entries))
		}
		if lim.bytes <= 0 {
			return true
		}
		if outside != nil && time.Since(layerAt) >= layerEvery {
			layerAt = time.Now()
			if n, err := outside(ctx); err == nil {
				layer = n
			} else {
				log.Debug("writable layer size", zap.Error(err))
			}
		}
		used += layer
		if used <= lim.bytes {
			return true
		}
		return w.stop(fmt.Sprintf("workspace reached %.2f GiB (%.2f GiB of it outside the mounted paths, in the container's own layer), over its limit agent.workspace_limit_gb = %.2f GiB", gib(used), gib(layer), gib(lim.bytes)))
	})
	return w
}

func (w *sizeWatch) over() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.why
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
