// The reaper: provisioned hosts of ended runs given back, leftover tasks killed.

package app

import (
	"context"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/fleet/provision"
	"github.com/mlrb/mlrb/internal/kit/every"
)

// reapJobs gives back, every interval, the provisioned hosts (Slurm jobs,
// EC2 instances) whose run has ended (terminated, reset, crashed between
// provisioning and giving back) or whose attempt the run has given up on
// (its provisioning answer lost): a host never outlives its use by more
// than an interval.
func reapJobs(ctx context.Context, s provision.Provider, c client.Client, period time.Duration, log *zap.Logger) {
	every.Tick(ctx, period, func() bool {
		jobs, err := s.List(ctx)
		if err != nil {
			log.Warn("reaper: list jobs", zap.Error(err))
			return true
		}
		if sw, ok := s.(provision.Sweeper); ok {
			if err := sw.Sweep(jobs); err != nil {
				log.Warn("reaper: sweep", zap.Error(err))
			}
		}
		for _, j := range jobs {
			h, _ := provision.ParseJobName(j.Name)
			runID, n := h.RunID, strconv.Itoa(h.N)
			if h.Role != "" {
				n = "" // an evaluation's number is not an attempt's
			}
			// The containers' fence asks the same question of a run.
			why := stale(ctx, c, runID, n)
			if why == "" {
				continue
			}
			log.Warn("reaper: giving back a host its run no longer uses", zap.String("job", j.ID), zap.String("run", runID), zap.String("why", why))
			if err := s.Stop(ctx, j); err != nil {
				log.Warn("reaper: cancel", zap.String("job", j.ID), zap.Error(err))
			}
		}
		return true
	})
}
