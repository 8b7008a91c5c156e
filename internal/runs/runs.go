// Package runs is the vocabulary of a run, shared by the workflows, the
// activities, the starter and the stores: how a run ends (Outcome), where
// it is (Phase), where a benchmark's run is (ChildState), what it reports
// (Result, Cost) and whom a lease or a provisioned host serves (Holder).
// It imports nothing of mlrb's but the budget ledger: every other package
// may import it.
package runs

import (
	"time"

	"github.com/mlrb/mlrb/internal/budget"
	"github.com/mlrb/mlrb/internal/llm"
)

// Outcome is how a run ended.
type Outcome string

// Outcomes of a run. Infra and evaluator failures carry no score, never 0.
const (
	OutcomeScored           Outcome = "scored"
	OutcomeAgentFailed      Outcome = "agent_failed"
	OutcomeLimitReached     Outcome = "limit_reached"
	OutcomeInfraFailed      Outcome = "infra_failed"
	OutcomeEvaluationFailed Outcome = "evaluation_failed"
	// OutcomeCanceled: an operator stopped the run; its work is kept in
	// the final checkpoint, unscored.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeDisqualified: the model breaks its task's rules (the
	// violations name each rule and the measured value); its score is
	// kept as a metric and never counts.
	OutcomeDisqualified Outcome = "disqualified"
)

// Outcomes lists every outcome.
func Outcomes() []Outcome {
	return []Outcome{OutcomeScored, OutcomeAgentFailed, OutcomeLimitReached, OutcomeInfraFailed, OutcomeEvaluationFailed, OutcomeCanceled, OutcomeDisqualified}
}

// Phase is where a run is.
type Phase string

// Phases a run goes through, shown by the status query and MlrbPhase.
const (
	PhaseResolving  Phase = "resolving"
	PhaseLeasing    Phase = "leasing"
	PhaseRunning    Phase = "running"
	PhaseRecovering Phase = "recovering"
	PhaseEvaluating Phase = "evaluating"
	// PhaseAwaitingEvalRetry: evaluation retries ran out; the run waits for
	// a retry-evaluation update (the agent's work is never re-run).
	PhaseAwaitingEvalRetry Phase = "awaiting_evaluation_retry"
	PhaseDone              Phase = "done"
)

// Phases lists every phase, in a run's order.
func Phases() []Phase {
	return []Phase{PhaseResolving, PhaseLeasing, PhaseRunning, PhaseRecovering, PhaseEvaluating, PhaseAwaitingEvalRetry, PhaseDone}
}

// ChildState is where a benchmark's run is: queued, running, or ended
// with its outcome.
type ChildState string

// States of a benchmark's runs before they end.
const (
	ChildQueued  ChildState = "queued"
	ChildRunning ChildState = "running"
)

// StateOf is the state of a benchmark's run that ended with outcome o.
func StateOf(o Outcome) ChildState { return ChildState(o) }

// Ledger is a run's time account (see budget.Ledger).
type Ledger = budget.Ledger

// Cost is what a run consumed: agent and GPU hours from its ledger, GPU
// hours lost to crashes, GPU hours billed, and the LLM usage the agent
// reported, when it did.
type Cost struct {
	AgentHours     float64 `json:"agent_hours"`
	GPUHours       float64 `json:"gpu_hours"`
	InfraWaitHours float64 `json:"infra_wait_hours"`
	WastedGPUHours float64 `json:"wasted_gpu_hours"`
	// BilledGPUHours is GPU time held for the run, whether used or not:
	// provisioned hosts from their start (boot and idle included) to
	// their release, static hosts for the time their slot was leased.
	BilledGPUHours float64 `json:"billed_gpu_hours"`
	// LLM is the run's LLM use as the gateway measured it, costed with
	// the price table LLMPrices names: the run's LLM cost.
	LLM       *llm.Ledger   `json:"llm,omitempty"`
	LLMPrices *llm.PriceRef `json:"llm_prices,omitempty"`
	// LLMInputTokens, LLMOutputTokens and LLMUSD are what the agent
	// reported of itself (output/usage.json): shown apart, never summed
	// with what was measured.
	LLMInputTokens  *int64   `json:"llm_input_tokens,omitempty"`
	LLMOutputTokens *int64   `json:"llm_output_tokens,omitempty"`
	LLMUSD          *float64 `json:"llm_usd,omitempty"`
}

// Result is what a finished run reports.
type Result struct {
	RunID       string             `json:"run_id"`
	Task        string             `json:"task"`
	Agent       string             `json:"agent"`
	Seed        int64              `json:"seed"`
	Outcome     Outcome            `json:"outcome"`
	Score       *float64           `json:"score"`
	Metrics     map[string]float64 `json:"metrics"`
	Attempts    int                `json:"attempts"`
	Checkpoints int                `json:"checkpoints"`
	SpecHash    string             `json:"spec_hash"`
	Budget      Ledger             `json:"budget"`
	Reason      string             `json:"reason,omitempty"`
	ModelPath   string             `json:"model_path,omitempty"`
	Violations  []string           `json:"constraint_violations,omitempty"`
	// Flags are findings that do not disqualify (an unmodified reference
	// model).
	Flags []string `json:"flags,omitempty"`
	// Provenance is what the evaluator scored against (its held-out
	// set's hash).
	Provenance  map[string]string `json:"evaluation_provenance,omitempty"`
	EvalTries   int               `json:"evaluation_attempts"`
	Evaluations []EvalAttempt     `json:"evaluations,omitempty"`
	Cost        Cost              `json:"cost"`
	// TimeLimitS and Hardware are the budget (before extensions) and the
	// hardware class ("CPU", "1× A100") the run had.
	TimeLimitS float64 `json:"time_limit_s,omitempty"`
	Hardware   string  `json:"hardware,omitempty"`
	// AgentImage and EvaluatorImage are digests, when containers ran them.
	AgentImage     string `json:"agent_image,omitempty"`
	EvaluatorImage string `json:"evaluator_image,omitempty"`
}

// EvalAttempt is one evaluation of the final checkpoint, kept in the result.
type EvalAttempt struct {
	Image string    `json:"image,omitempty"`
	Score *float64  `json:"score,omitempty"`
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// End is how a run ended, as a benchmark waiting on it learns it.
type End struct {
	RunID   string
	Outcome Outcome
	Reason  string `json:",omitempty"`
}
