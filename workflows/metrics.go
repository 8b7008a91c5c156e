// Figures the runs record through the SDK's metrics handler (runCore.metrics), which leaves out replays.

package workflows

import "time"

// Figures the runs record through the SDK's metrics handler
// (runCore.metrics), which leaves out replays: each is recorded once,
// when it happens. Timers reach Prometheus as histograms named
// <name>_seconds.
const (
	MetricLeaseWait = "mlrb_lease_wait"   // wait for a slot, per lease granted
	MetricInfraWait = "mlrb_infra_wait"   // time a run waited on infrastructure, per booking
	MetricLost      = "mlrb_attempt_lost" // agent time past the last checkpoint, per lost attempt
)

func seconds(s float64) time.Duration { return time.Duration(max(0, s) * float64(time.Second)) }
