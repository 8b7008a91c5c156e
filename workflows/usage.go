// RunLLM is what a run's LLM calls through the gateway used.

package workflows

import (
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// RunLLM is what a run's LLM calls through the gateway used: its ledger,
// all attempts together, the budget it ran under and the price table it
// was costed with.
type RunLLM struct {
	Ledger llm.Ledger   `json:"ledger"`
	Budget llm.Budget   `json:"budget,omitzero"`
	Prices llm.PriceRef `json:"prices"`
}

// usageState keeps each attempt's latest ledger, as its reports come.
type usageState struct {
	c        *runCore
	ch       workflow.ReceiveChannel
	attempts map[int]llm.Ledger
	prices   llm.PriceRef
}

// take keeps a report unless the attempt's ledger already counts more
// calls: reports of one attempt only grow, and a new attempt's report of
// an earlier one (from its transcript) may be ahead of what that attempt
// signalled before it was lost, never behind.
func (u *usageState) take(rep activities.UsageReport) {
	if u.attempts == nil {
		u.attempts = map[int]llm.Ledger{}
	}
	if old, ok := u.attempts[rep.Attempt]; ok && old.Calls+old.Refused > rep.Ledger.Calls+rep.Ledger.Refused {
		return
	}
	u.attempts[rep.Attempt] = rep.Ledger
	u.prices = rep.Prices
}

// drain takes the reports already delivered.
func (u *usageState) drain() {
	var rep activities.UsageReport
	for u.ch.ReceiveAsync(&rep) {
		u.take(rep)
		rep = activities.UsageReport{}
	}
}

// total is the run's ledger, summed in attempt order.
func (u *usageState) total() llm.Ledger {
	var l llm.Ledger
	for _, n := range slices.Sorted(maps.Keys(u.attempts)) {
		l.Merge(u.attempts[n])
	}
	return l
}

// llmBudget is the run's LLM budget: its own, else its task's.
func (u *usageState) llmBudget() llm.Budget {
	if u.c.in.LLMBudget != nil {
		return *u.c.in.LLMBudget
	}
	if b := u.c.spec.Spec.LLMBudget; b != nil {
		return *b
	}
	return llm.Budget{}
}

// llm is the run's LLM use so far, for its status and result (nil: the
// agent made no call through the gateway).
func (u *usageState) llm() *RunLLM {
	if len(u.attempts) == 0 {
		return nil
	}
	return &RunLLM{Ledger: u.total(), Budget: u.llmBudget(), Prices: u.prices}
}

// result: the gateway's measure of the run's LLM use, in its cost.
func (u *usageState) result(res *runs.Result) {
	if l := u.llm(); l != nil {
		res.Cost.LLM, res.Cost.LLMPrices = &l.Ledger, &l.Prices
	}
}

// budgetSpentReason says why a run whose LLM budget was spent stopped.
func (u *usageState) budgetSpentReason() string {
	return fmt.Sprintf("the run's LLM budget (%s) was spent: the agent was stopped as at its deadline and its model evaluated", u.llmBudget())
}
