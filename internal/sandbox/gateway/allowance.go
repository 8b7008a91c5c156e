// An attempt's door allowance: refused calls and connections counted.

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
	// MaxRefusedBytes bounds the request bytes the door reads of calls
	// it refuses (0: DefaultMaxRefusedBytes): a refusal costs the worker
	// the body it read, and 32 MiB bodies would pass MaxRefused only
	// after terabytes.
	MaxRefusedBytes int64
	MaxConns        int
	// Exceeded is told why the attempt passed its allowance (nil: no one).
	Exceeded     func(why string)
	refused      atomic.Int64
	refusedBytes atomic.Int64
	told         atomic.Bool
}

// DefaultMaxRefusedBytes is gateway.max_refused_mb's default.
const DefaultMaxRefusedBytes = 4 << 30

func (a *Allowance) maxConns() int {
	if a == nil || a.MaxConns <= 0 {
		return DefaultMaxConns
	}
	return a.MaxConns
}

// refusal counts a call or connection refused, and the bytes of its
// request read before it was.
func (a *Allowance) refusal(bytes int64) {
	if a == nil {
		return
	}
	limit, bytesLimit := a.MaxRefused, a.MaxRefusedBytes
	if limit <= 0 {
		limit = DefaultMaxRefused
	}
	if bytesLimit <= 0 {
		bytesLimit = DefaultMaxRefusedBytes
	}
	switch n, b := a.refused.Add(1), a.refusedBytes.Add(bytes); {
	case n > limit:
		a.exceed(fmt.Sprintf("the agent made more than %d calls or connections its door refused, over gateway.max_refused", limit))
	case b > bytesLimit:
		a.exceed(fmt.Sprintf("the agent sent more than %d MiB in calls its door refused, over gateway.max_refused_mb", bytesLimit>>20))
	}
}

// exceed tells Exceeded, once.
func (a *Allowance) exceed(why string) {
	if a.Exceeded != nil && a.told.CompareAndSwap(false, true) {
		a.Exceeded(why)
	}
}

// Refused is how many calls and connections were refused.
func (a *Allowance) Refused() int64 {
	if a == nil {
		return 0
	}
	return a.refused.Load()
}
