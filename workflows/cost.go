// costOf is what a run consumed, from its ledger and the usage its agent reported.

package workflows

import (
	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/budget"
)

// costOf is what a run consumed, from its ledger and the usage its agent
// reported.
func costOf(b budget.Account, gpuCount int, ev *activities.EvalResult) Cost {
	gpus := float64(gpuCount)
	c := Cost{AgentHours: b.UsedS / 3600, GPUHours: b.UsedS * gpus / 3600, InfraWaitHours: b.InfraWaitS / 3600, WastedGPUHours: b.LostS * gpus / 3600}
	if ev != nil && ev.Usage != nil {
		c.LLMInputTokens, c.LLMOutputTokens, c.LLMUSD = ev.Usage.InputTokens, ev.Usage.OutputTokens, ev.Usage.CostUSD
	}
	return c
}
