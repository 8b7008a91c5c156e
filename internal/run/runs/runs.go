// The run vocabulary: outcomes, phases, the result and its parts.

// Package runs is the vocabulary of a run, shared by the workflows, the
// activities, the starter and the stores: how a run ends (Outcome), where
// it is (Phase), where a benchmark's run is (ChildState), what it reports
// (Result, Cost) and whom a lease or a provisioned host serves (Holder).
// It imports nothing of mlrb's but the budget ledger: every other package
// may import it.
package runs

import (
	"fmt"
	"time"

	"github.com/mlrb/mlrb/internal/run/gpucost"

	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/llm"
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
	// OutcomeHacked: a reviewer found the score was not earned (the
	// run's Review says who, when and why): the agent's failure.
	OutcomeHacked Outcome = "hacked"
)

// DisqualifiedScore is the metric that keeps a disqualified model's
// score, which never counts.
const DisqualifiedScore = "disqualified/score"

// Outcomes lists every outcome.
func Outcomes() []Outcome {
	return []Outcome{OutcomeScored, OutcomeAgentFailed, OutcomeLimitReached, OutcomeInfraFailed, OutcomeEvaluationFailed, OutcomeCanceled, OutcomeDisqualified, OutcomeHacked}
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
	// PhaseScoringCurve: the final model is scored; the checkpoints at the
	// curve's marks are being evaluated.
	PhaseScoringCurve Phase = "scoring_curve"
	// PhaseAwaitingCurveRetry: a mark's evaluations ran out; the run waits
	// for a retry-curve update, its final score kept.
	PhaseAwaitingCurveRetry Phase = "awaiting_curve_retry"
	// PhaseAwaitingPerson: a person's run waits, holding no lease, for
	// its person to start their clock (at its start, or after a pause
	// gave its GPU back).
	PhaseAwaitingPerson Phase = "awaiting_person"
	PhaseDone           Phase = "done"
)

// Phases lists every phase, in a run's order.
func Phases() []Phase {
	return []Phase{PhaseResolving, PhaseLeasing, PhaseRunning, PhaseRecovering, PhaseEvaluating, PhaseAwaitingEvalRetry, PhaseScoringCurve, PhaseAwaitingCurveRetry, PhaseAwaitingPerson, PhaseDone}
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
	// GPUUSD is BilledGPUHours at the rate GPUPrices names, set when the
	// result is stored (nil: the host class has no price).
	GPUUSD    *float64     `json:"gpu_usd,omitempty"`
	GPUPrices *gpucost.Ref `json:"gpu_prices,omitempty"`
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
	Budget      budget.Account     `json:"budget"`
	Reason      string             `json:"reason,omitempty"`
	ModelPath   string             `json:"model_path,omitempty"`
	Violations  []string           `json:"constraint_violations,omitempty"`
	// Flags are findings that do not disqualify (an unmodified reference
	// model).
	Flags []string `json:"flags,omitempty"`
	// Provenance is what the evaluator scored against (its held-out
	// set's hash).
	Provenance map[string]string `json:"evaluation_provenance,omitempty"`
	// ImageCopies are the scored model's weight files byte-identical to
	// a file of the agent's image (the worker compares them as it
	// evaluates): weights the image brought, not ones the run made.
	ImageCopies []ImageCopy `json:"image_copies,omitempty"`
	// ImageNotCompared says why the weights were not all compared with
	// the agent's image (the image unreadable, the comparison out of
	// time, more weight files than are compared): no copy found is then
	// no evidence that none was made.
	ImageNotCompared string        `json:"image_not_compared,omitempty"`
	EvalTries        int           `json:"evaluation_attempts"`
	Evaluations      []EvalAttempt `json:"evaluations,omitempty"`
	Cost             Cost          `json:"cost"`
	// TimeLimitS and Hardware are the budget (before extensions) and the
	// hardware class ("CPU", "1× A100") the run had.
	TimeLimitS float64 `json:"time_limit_s,omitempty"`
	Hardware   string  `json:"hardware,omitempty"`
	// AgentImage and EvaluatorImage name what ran: an image's digest or a
	// binary's hash; for the reference evaluator, its scoring code's
	// (reference.Evaluator).
	AgentImage string `json:"agent_image,omitempty"`
	// AgentDef is the agent's definition as it ran (nil in results from
	// before definitions).
	AgentDef *AgentRef `json:"agent_definition,omitempty"`
	// People are the labels of a person's run's invitations; Notes what
	// they wrote with `task note`, at their agent time.
	People []string        `json:"people,omitempty"`
	Notes  []contract.Note `json:"notes,omitempty"`
	// Benchmark is the benchmark the run belongs to ("": a lone run).
	Benchmark      string `json:"benchmark_id,omitempty"`
	EvaluatorImage string `json:"evaluator_image,omitempty"`
	// Curve is the run's score over agent time, best so far at each mark.
	Curve []Mark `json:"curve,omitempty"`
	// AttemptLog and CheckpointLog are the run's timeline: its agent
	// attempts and the checkpoints it committed (a continued run's hold
	// what this execution saw).
	AttemptLog    []AttemptRecord  `json:"attempt_log,omitempty"`
	CheckpointLog []CheckpointInfo `json:"checkpoint_log,omitempty"`
	// Research measures the experiments the agent ran, as the worker saw
	// them from the host (set when the result is stored; nil: the run
	// was not observed).
	Research *Measures `json:"research,omitempty"`
	// Review is a reviewer's latest verdict on the run (nil: none).
	Review *Verdict `json:"review,omitempty"`
}

// ImageCopy is a model file (its path under the model) byte-identical to
// a file of the agent's image.
type ImageCopy struct {
	File  string `json:"file"`
	Image string `json:"image_file"`
	Size  int64  `json:"size"`
}

// Verdicts a reviewer gives a run.
const (
	VerdictOK     = "ok"
	VerdictHacked = "hacked"
)

// Verdict is a reviewer's word on a run: ok, or hacked (its score was
// not earned, and the run counts as the agent's failure).
type Verdict struct {
	Verdict string    `json:"verdict"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Note    string    `json:"note"`
	// Outcome, Score and Reason are the run's as it ended, before a
	// hacked verdict took its score away.
	Outcome Outcome  `json:"outcome"`
	Score   *float64 `json:"score,omitempty"`
	Reason  string   `json:"reason,omitempty"`
}

// Apply puts v on r (nil: none), in place of any earlier verdict: a
// hacked run loses its score (kept in the verdict) and is the agent's
// failure, its reason saying who found what.
func Apply(r *Result, v *Verdict) {
	if old := r.Review; old != nil {
		r.Outcome, r.Score, r.Reason = old.Outcome, old.Score, old.Reason
		r.Review = nil
	}
	if v == nil {
		return
	}
	c := *v
	c.Outcome, c.Score, c.Reason = r.Outcome, r.Score, r.Reason
	r.Review = &c
	if c.Verdict == VerdictHacked {
		r.Outcome, r.Score = OutcomeHacked, nil
		r.Reason = fmt.Sprintf("marked hacked on review by %s at %s: %s", c.By, c.At.UTC().Format(time.RFC3339), c.Note)
	}
}

// AgentRef is what a result records of the agent that ran: its
// definition's name and hash, the image (or, for a built-in agent run as
// a process, the binary) by digest, and the provider and model it was
// given.
type AgentRef struct {
	Name     string `json:"name"`
	Hash     string `json:"definition_hash"`
	Image    string `json:"image_digest,omitempty"`
	Builtin  string `json:"builtin,omitempty"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Human is a person's condition (Unassisted, or the AI help they
	// had); "" for an agent.
	Human string `json:"human,omitempty"`
}

// Unassisted is the condition of a person who had no AI help.
const Unassisted = "unassisted"

// EvalAttempt is one evaluation of the final checkpoint, kept in the result.
type EvalAttempt struct {
	// Started is when it was asked for (its lease wait included).
	Started time.Time `json:"started"`
	Image   string    `json:"image,omitempty"`
	Score   *float64  `json:"score,omitempty"`
	Error   string    `json:"error,omitempty"`
	At      time.Time `json:"at"`
}

// End is how a run ended, as a benchmark waiting on it learns it.
type End struct {
	RunID   string
	Outcome Outcome
	Reason  string `json:",omitempty"`
}

// Mark is one point of a run's score over time: the committed checkpoint
// nearest a mark of agent time, evaluated after the run's final
// evaluation with the same evaluator.
type Mark struct {
	// AtS is the mark, in agent seconds.
	AtS float64 `json:"at_s"`
	// Seq and AgentS are the checkpoint evaluated and the agent time it
	// holds (0: the run had no checkpoint to evaluate).
	Seq    int     `json:"seq,omitempty"`
	AgentS float64 `json:"agent_s"`
	// Score is the checkpoint's; Best the best score at or before it.
	Score *float64 `json:"score,omitempty"`
	Best  *float64 `json:"best,omitempty"`
	// NoModel says why the checkpoint had no model to score ("no model
	// yet"): never a 0.
	NoModel string `json:"no_model,omitempty"`
	// Error is the last failed evaluation's, while the mark has none
	// that succeeded.
	Error string `json:"error,omitempty"`
	// Split is the held-out split scored: "dev" when the task names a
	// dev-split evaluation for its marks, else "test".
	Split string `json:"split"`
	Tries int    `json:"tries"`
	// CostUSD is what the run had cost by the mark's agent time: its GPUs
	// at the result's rate, and the LLM calls it had made (set when the
	// result is stored; nil: the GPUs have no price).
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// Later tells a mark served by a checkpoint taken after it (within the
// checkpoint interval the rule allows): its model is the one of AgentS,
// not of AtS, and is shown so.
func (m Mark) Later() bool { return m.Seq > 0 && m.AgentS > m.AtS+0.5 }

// Done tells whether the mark has its answer: a score, or no model.
func (m Mark) Done() bool { return m.Score != nil || m.NoModel != "" }

// BestSoFar fills each mark's Best: the highest score at or before it.
func BestSoFar(marks []Mark) {
	var best *float64
	for i := range marks {
		if s := marks[i].Score; s != nil && (best == nil || *s > *best) {
			v := *s
			best = &v
		}
		marks[i].Best = best
	}
}

// AttemptRecord is one agent attempt on the run's timeline.
type AttemptRecord struct {
	N    int    `json:"n"`
	Host string `json:"host,omitempty"`
	// LeaseWaitS is the wait for its slot (and host), before LeasedAt.
	LeaseWaitS float64   `json:"lease_wait_s"`
	LeasedAt   time.Time `json:"leased_at"`
	EndedAt    time.Time `json:"ended_at"`
	// FromS and ToS are the agent time it started from and reached;
	// LostS what a loss cost (run past the last checkpoint).
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	LostS float64 `json:"lost_s,omitempty"`
	// End is how it ended: "exited", "deadline", "llm_budget",
	// "canceled", "handed_back", "lost".
	End    string `json:"end"`
	Detail string `json:"detail,omitempty"`
}

// CheckpointInfo is one committed checkpoint, as the run accepted it.
type CheckpointInfo struct {
	Seq      int       `json:"seq"`
	Attempt  int       `json:"attempt"`
	At       time.Time `json:"at"`
	AgentS   float64   `json:"agent_s"`
	Files    int       `json:"files"`
	Bytes    int64     `json:"bytes"`
	NewBytes int64     `json:"new_bytes"`
	Final    bool      `json:"final,omitempty"`
}
