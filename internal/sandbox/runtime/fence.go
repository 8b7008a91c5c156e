// Labels of an attempt's task, by which the reaper and the fence find it.

package runtime

import (
	"context"
	"time"

	"github.com/mlrb/mlrb/internal/kit/every"
	"go.uber.org/zap"
)

// Label keys of an attempt's task (TaskSpec.Labels); containers carry them
// as io.mlrb.<key>.
const (
	LabelRun     = "run"
	LabelAttempt = "attempt"
	LabelToken   = "token"
	LabelTask    = "task"
	LabelRole    = "role"
)

// Stale says why the task of run (and attempt, for agents; "" for
// evaluators) must go, or "" when it belongs to a live attempt or the
// answer is not known.
type Stale func(ctx context.Context, run, attempt string) string

// Fence removes, every interval, containers of this host whose run and
// attempt labels stale rejects: a run that ended, or an attempt its run
// has given up on. An old attempt cut off by a partition never runs
// beside the new one for longer than an interval.
func (d *Docker) Fence(ctx context.Context, period time.Duration, stale Stale, log *zap.Logger) {
	every.Tick(ctx, period, func() bool {
		tasks, err := d.Tasks(ctx)
		if err != nil {
			log.Warn("fencing: list containers", zap.Error(err))
			return true
		}
		for _, task := range tasks {
			run := task.Labels[labelPrefix+LabelRun]
			if run == "" {
				continue
			}
			if why := stale(ctx, run, task.Labels[labelPrefix+LabelAttempt]); why != "" {
				log.Warn("fencing: removing a stale container", zap.String("run", run), zap.String("container", task.ID[:12]), zap.String("why", why))
				if err := d.Remove(ctx, task.ID); err != nil {
					log.Warn("fencing", zap.Error(err))
				}
			}
		}
		return true
	})
}
