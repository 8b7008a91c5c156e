// LLM tokens normalised across providers.

// Package llm is the vocabulary of metered LLM use: a call's usage in one
// normalised form whatever the provider, the price table that turns it
// into dollars, and the run's budget that calls reserve against.
package llm

import (
	"fmt"
	"maps"
	"slices"
)

// Tokens is a call's usage, normalised across providers so that each
// field means one thing: Input counts only uncached input (OpenAI's
// prompt_tokens less its cached_tokens; Anthropic's input_tokens, which
// already excludes cache reads and writes), and Reasoning is the part of
// Output spent reasoning (billed as output by both).
type Tokens struct {
	Input      int64 `json:"input"`
	CacheRead  int64 `json:"cache_read"`
	CacheWrite int64 `json:"cache_write"`
	Output     int64 `json:"output"`
	Reasoning  int64 `json:"reasoning"`
}

// Total is every token billed: input of all kinds and output.
func (t Tokens) Total() int64 { return t.Input + t.CacheRead + t.CacheWrite + t.Output }

// Add adds o in.
func (t *Tokens) Add(o Tokens) {
	t.Input += o.Input
	t.CacheRead += o.CacheRead
	t.CacheWrite += o.CacheWrite
	t.Output += o.Output
	t.Reasoning += o.Reasoning
}

// Usage is a ledger of calls: what they used and cost, and how they went.
type Usage struct {
	Calls  int64   `json:"calls"`
	Tokens Tokens  `json:"tokens"`
	USD    float64 `json:"usd"`
	// Estimated counts calls whose usage the provider never reported (a
	// stream cut off): they are charged their reservation, the worst case.
	Estimated int64 `json:"estimated,omitempty"`
	// Failed counts calls the provider answered with an error.
	Failed int64 `json:"failed,omitempty"`
	// Refused counts calls the gateway refused (budget, unpriced model,
	// bad key); they cost nothing and never reached the provider.
	Refused int64 `json:"refused,omitempty"`
	// RateLimited counts the provider's 429 answers, and RateLimitWaitS
	// the time they told the agent to wait (retry-after).
	RateLimited    int64   `json:"rate_limited,omitempty"`
	RateLimitWaitS float64 `json:"rate_limit_wait_s,omitempty"`
}

// Add adds o in.
func (u *Usage) Add(o Usage) {
	u.Calls += o.Calls
	u.Tokens.Add(o.Tokens)
	u.USD += o.USD
	u.Estimated += o.Estimated
	u.Failed += o.Failed
	u.Refused += o.Refused
	u.RateLimited += o.RateLimited
	u.RateLimitWaitS += o.RateLimitWaitS
}

// Ledger is usage in total and per model: per model, so that a run can
// be costed again under another price table.
type Ledger struct {
	Usage
	ByModel map[string]Usage `json:"by_model,omitempty"`
}

// Record adds one call's usage under its model.
func (l *Ledger) Record(model string, u Usage) {
	l.Usage.Add(u)
	if l.ByModel == nil {
		l.ByModel = map[string]Usage{}
	}
	m := l.ByModel[model]
	m.Add(u)
	l.ByModel[model] = m
}

// Merge adds another ledger in. Every call is recorded under a model
// ("" for one refused before its model was known), so the per-model
// ledgers sum to the total.
func (l *Ledger) Merge(o Ledger) {
	for _, m := range slices.Sorted(maps.Keys(o.ByModel)) {
		l.Record(m, o.ByModel[m])
	}
}

// Clone is a deep copy.
func (l Ledger) Clone() Ledger {
	l.ByModel = maps.Clone(l.ByModel)
	return l
}

// Recost is the ledger's cost under another price table; a model in it
// that the table does not price is an error naming it.
func (l Ledger) Recost(p *Prices) (float64, error) {
	var usd float64
	for _, m := range slices.Sorted(maps.Keys(l.ByModel)) {
		u := l.ByModel[m]
		if u.Tokens == (Tokens{}) {
			continue
		}
		pr, ok := p.Lookup(m)
		if !ok {
			return 0, fmt.Errorf("model %q has no price in the table dated %s", m, p.Date)
		}
		usd += pr.Cost(u.Tokens)
	}
	return usd, nil
}
