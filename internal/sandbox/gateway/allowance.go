package gateway

import (
	"fmt"
	"sync/atomic"
)

// DefaultMaxRefused and DefaultMaxConns are gateway.max_refused's and
// gateway.max_connections' defaults.
const (
	DefaultMaxRefused = 100_000
	DefaultMaxConns   = 128
)

// Allowance is what one attempt's agent may make its door hold or
// refuse. Connections past MaxConns wait in the kernel's backlog, never
// in the worker; a call or connection refused is answered at once, and
// past MaxRefused of them Exceeded is told, once: the attempt is
// stopped as the agent's failure, naming the limit. A 429 (too many
// calls or connections at once) is the door's backpressure, not a
// refusal: an agent whose SDK retries it is well-behaved, however many
// it meets in a day. A flood of calls the door refuses (a wrong token,
// an unpriced model, the allow-list: audit H3) reaches the limit in
// seconds.
type Allowance struct {
	MaxRefused int64
	MaxConns   int
	// Exceeded is told why the attempt passed its allowance (nil: no one).
	Exceeded func(why string)
	refused  atomic.Int64
}

func (a *Allowance) maxConns() int {
	if a == nil || a.MaxConns <= 0 {
		return DefaultMaxConns
	}
	return a.MaxConns
}

// refusal counts a call or connection refused.
func (a *Allowance) refusal() {
	if a == nil {
		return
	}
	limit := a.MaxRefused
	if limit <= 0 {
		limit = DefaultMaxRefused
	}
	if a.refused.Add(1) == limit+1 && a.Exceeded != nil {
		a.Exceeded(fmt.Sprintf("the agent made more than %d calls or connections its door refused, over gateway.max_refused", limit))
	}
}

// Refused is how many calls and connections were refused.
func (a *Allowance) Refused() int64 {
	if a == nil {
		return 0
	}
	return a.refused.Load()
}
