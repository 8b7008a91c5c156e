// The LLM budget meter: dollars and tokens reserved and settled.

package llm

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// Budget bounds a run's LLM use in dollars and tokens (0: no bound).
type Budget struct {
	USD    float64 `json:"usd,omitempty" yaml:"usd,omitempty"`
	Tokens int64   `json:"tokens,omitempty" yaml:"tokens,omitempty"`
}

// MaxBudgetUSD bounds a budget in dollars: beyond it a figure is a typo.
const MaxBudgetUSD = 1e6

// Check tells whether the budget is one: dollars and tokens not negative,
// dollars a finite figure up to MaxBudgetUSD.
func (b Budget) Check() error {
	if math.IsNaN(b.USD) || b.USD < 0 || b.USD > MaxBudgetUSD {
		return fmt.Errorf("usd: %g is not a budget in dollars (0 to %g; 0: none)", b.USD, MaxBudgetUSD)
	}
	if b.Tokens < 0 {
		return fmt.Errorf("tokens: %d is negative (0: none)", b.Tokens)
	}
	return nil
}

// Set tells whether the budget bounds anything.
func (b Budget) Set() bool { return b.USD > 0 || b.Tokens > 0 }

func (b Budget) String() string {
	switch {
	case b.USD > 0 && b.Tokens > 0:
		return fmt.Sprintf("$%.2f and %d tokens", b.USD, b.Tokens)
	case b.USD > 0:
		return fmt.Sprintf("$%.2f", b.USD)
	case b.Tokens > 0:
		return fmt.Sprintf("%d tokens", b.Tokens)
	}
	return "none"
}

// ErrOverBudget is a call the run's budget cannot pay for.
var ErrOverBudget = errors.New("over the run's LLM budget")

// spentBelow: a budget with less than this share left is spent.
const spentBelow = 0.01

// Meter is one attempt's ledger and the run's budget. Each call reserves
// its worst case before it is sent and settles to what it cost after, so
// that calls in flight at once can never together spend past the budget.
type Meter struct {
	budget Budget
	mu     sync.Mutex
	// prior is what earlier attempts of the run spent.
	prior    Usage
	ledger   Ledger
	heldUSD  float64
	heldTok  int64
	inflight int
	spent    bool
}

// NewMeter meters an attempt under the run's budget, of which earlier
// attempts spent prior.
func NewMeter(b Budget, prior Usage) *Meter {
	m := &Meter{budget: b, prior: prior}
	m.checkSpent()
	return m
}

// Hold is a call's reservation.
type Hold struct {
	m      *Meter
	USD    float64
	Tokens int64
	done   bool
}

// Reserve holds a call's worst case (usd, tokens) against the budget; it
// fails with ErrOverBudget, saying what is left, when the budget cannot
// pay for it. inputOnly is the call's cost with no output at all: when
// even that cannot be paid and nothing is in flight, the budget is spent.
func (m *Meter) Reserve(usd float64, tokens int64, inputOnlyUSD float64, inputTokens int64) (*Hold, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	leftUSD, leftTok := m.left()
	if (m.budget.USD > 0 && usd > leftUSD) || (m.budget.Tokens > 0 && tokens > leftTok) {
		if m.inflight == 0 && ((m.budget.USD > 0 && inputOnlyUSD > leftUSD) || (m.budget.Tokens > 0 && inputTokens >= leftTok)) {
			m.spent = true
		}
		return nil, fmt.Errorf("%w: this call may cost up to $%.4f and %d tokens (its input and max output tokens at the model's price); the run's budget is %s, of which $%.4f and %d tokens are left (calls in flight hold their worst case until they end)",
			ErrOverBudget, usd, tokens, m.budget, max(leftUSD, 0), max(leftTok, 0))
	}
	m.heldUSD += usd
	m.heldTok += tokens
	m.inflight++
	return &Hold{m: m, USD: usd, Tokens: tokens}, nil
}

// left is what the budget has left beyond what was spent and is held.
func (m *Meter) left() (float64, int64) {
	used := m.prior
	used.Add(m.ledger.Usage)
	return m.budget.USD - used.USD - m.heldUSD, m.budget.Tokens - used.Tokens.Total() - m.heldTok
}

// Settle ends the call: it is recorded under model as it cost (u), and
// its reservation is given back.
func (h *Hold) Settle(model string, u Usage) {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if !h.done {
		h.done = true
		m.heldUSD -= h.USD
		m.heldTok -= h.Tokens
		m.inflight--
	}
	m.ledger.Record(model, u)
	m.checkSpent()
}

// Record records a call that reserved nothing (a refusal).
func (m *Meter) Record(model string, u Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ledger.Record(model, u)
}

func (m *Meter) checkSpent() {
	if !m.budget.Set() {
		return
	}
	leftUSD, leftTok := m.left()
	if (m.budget.USD > 0 && leftUSD < spentBelow*m.budget.USD) || (m.budget.Tokens > 0 && float64(leftTok) < spentBelow*float64(m.budget.Tokens)) {
		m.spent = true
	}
}

// Spent tells whether the budget is spent: less than 1 % of it left, or
// a call refused that even without output it could not pay for, with
// nothing in flight that might give some back.
func (m *Meter) Spent() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spent
}

// Ledger is this attempt's ledger so far.
func (m *Meter) Ledger() Ledger {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ledger.Clone()
}

// Budget is the run's budget.
func (m *Meter) Budget() Budget { return m.budget }
