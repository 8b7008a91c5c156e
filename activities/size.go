package activities

import (
	"context"
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
const sizeEvery = 10 * time.Second

// sizeWatch measures a workspace on disk against a limit, in the
// background, until its context ends.
type sizeWatch struct {
	mu    sync.Mutex
	limit int64
	why   string
}

// watchSize starts measuring root every sizeEvery.
func watchSize(ctx context.Context, root string, limit int64, log *zap.Logger) *sizeWatch {
	w := &sizeWatch{limit: limit}
	go every.Tick(ctx, sizeEvery, func() bool {
		used, err := diskUsage(root)
		if err != nil {
			log.Debug("workspace size", zap.Error(err))
			return true
		}
		if used <= limit {
			return true
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.why = fmt.Sprintf("workspace reached %.2f GiB, over its limit agent.workspace_limit_gb = %.2f GiB", gib(used), gib(limit))
		return false
	})
	return w
}

func (w *sizeWatch) over() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.why
}

// minEntryBytes is what any entry is charged at least: an empty file
// takes no blocks but an inode and a directory entry, and a checkpoint
// lists it. A million empty files count 4 GiB against the limit.
const minEntryBytes = 4 << 10

// diskUsage is what root's entries cost against the workspace limit: a
// file's allocated blocks (as du counts them) or its apparent size,
// whichever is larger (a sparse file is read whole by a checkpoint),
// and never less than minEntryBytes; a file hardlinked twice counts
// once. The agent may be changing the tree: it is walked from
// descriptors (safefs.Dir.Walk), never through a link.
func diskUsage(root string) (int64, error) {
	d, err := safefs.OpenDir(root)
	if err != nil {
		return 0, fmt.Errorf("measure %s: %w", root, err)
	}
	defer func() { _ = d.Close() }()
	var total int64
	seen := map[[2]uint64]bool{}
	err = d.Walk(func(e safefs.Entry) error {
		st := e.Stat
		if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			id := [2]uint64{st.Dev, st.Ino}
			if seen[id] {
				return nil
			}
			seen[id] = true
		}
		total += max(st.Blocks*512, st.Size, minEntryBytes)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure %s: %w", root, err)
	}
	return total, nil
}
