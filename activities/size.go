package activities

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
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
	go func() {
		t := time.NewTicker(sizeEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			used, err := diskUsage(root)
			if err != nil {
				log.Debug("workspace size", zap.Error(err))
				continue
			}
			if used > limit {
				w.mu.Lock()
				w.why = fmt.Sprintf("workspace reached %.2f GiB, over its limit agent.workspace_limit_gb = %.2f GiB", gib(used), gib(limit))
				w.mu.Unlock()
				return
			}
		}
	}()
	return w
}

func (w *sizeWatch) over() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.why
}

// diskUsage is what root's files take on disk (allocated blocks, as du
// counts them: a sparse file costs what it holds; a file hardlinked
// twice counts once).
func diskUsage(root string) (int64, error) {
	var total int64
	seen := map[[2]uint64]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file the agent removed meanwhile
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			total += info.Size()
			return nil
		}
		if st.Nlink > 1 {
			id := [2]uint64{st.Dev, st.Ino}
			if seen[id] {
				return nil
			}
			seen[id] = true
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure %s: %w", root, err)
	}
	return total, nil
}
