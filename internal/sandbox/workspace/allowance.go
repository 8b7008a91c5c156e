// Allowance is one attempt's share of its worker.

package workspace

import (
	"sync"

	"github.com/mlrb/mlrb/internal/sandbox/gateway"
)

// Allowance is one attempt's share of its worker. Everything the agent
// can make the worker hold is bounded by it: its workspace and layer
// (bytes, entries, depth: sizeWatch), its checkpoints' manifests
// (checkpoint.Bounds), its door's connections and refusals, in count and
// bytes (gateway.Allowance), its calls' bodies (gateway.Bounds), its
// transcript's queue and records (transcript.Recorder), its observation
// (observe's calls and samples, command lines read bounded) and its log
// (agent.log_limit_mb). What can wait waits (a connection in the
// kernel's backlog, a call answered 429); what cannot is a limit passed:
// the first one stops the attempt, the agent's failure naming it, and
// no other attempt on the host notices.
type Allowance struct {
	mu   sync.Mutex
	why  string
	Door *gateway.Allowance
}

// NewAllowance is an attempt's allowance, its door's sized by the
// operator (gateway.max_refused, gateway.max_connections).
func NewAllowance(door *gateway.Allowance) *Allowance {
	a := &Allowance{Door: door}
	door.Exceeded = a.Exceed
	return a
}

// Exceed records the first limit passed; the supervisor stops the agent.
func (a *Allowance) Exceed(why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.why == "" {
		a.why = why
	}
}

// Over is the limit passed, "" while none is.
func (a *Allowance) Over() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.why
}
