// The workflows' names, queries, search attributes and status types.

// Package workflows holds mlrb's deterministic orchestration: RunWorkflow
// (one task × seed × agent), BenchmarkWorkflow (a fan-out of runs), the
// budget ledger and the status types. No disk, clock or network here.
// It stands on floor 8, over activities.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/tasks"
)

// Names of workflows, queries and search attributes.
const (
	RunWorkflowName       = "RunWorkflow"
	BenchmarkWorkflowName = "BenchmarkWorkflow"
	QueryStatus           = "status"
	QueryProgress         = "progress"
	UpdateRetryEvaluation = "retry-evaluation"
	UpdateExtend          = "extend"
	UpdateCancel          = "cancel"
	// SignalRunParked: a benchmark's run (its id the payload) waits for an
	// operator's retry; the benchmark frees its slot.
	SignalRunParked = "run-parked"
)

// Search attributes; `worker --dev` registers them, a cluster needs
// `temporal operator search-attribute create` for each.
var (
	SATask      = temporal.NewSearchAttributeKeyKeyword("MlrbTask")
	SAAgent     = temporal.NewSearchAttributeKeyKeyword("MlrbAgent")
	SABenchmark = temporal.NewSearchAttributeKeyKeyword("MlrbBenchmark")
	SAOutcome   = temporal.NewSearchAttributeKeyKeyword("MlrbOutcome")
	SAPhase     = temporal.NewSearchAttributeKeyKeyword("MlrbPhase")
)

// RunSearchAttributes are a run's labels as it starts (its task, agent,
// benchmark, and phase resolving): started with them, the start's own
// visibility record holds them, and the run does not write them again.
func RunSearchAttributes(in RunInput) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(runLabels(in)...)
}

func runLabels(in RunInput) []temporal.SearchAttributeUpdate {
	sas := []temporal.SearchAttributeUpdate{SATask.ValueSet(in.Task), SAAgent.ValueSet(in.Agent), SAPhase.ValueSet(string(runs.PhaseResolving))}
	if in.Benchmark != "" {
		sas = append(sas, SABenchmark.ValueSet(in.Benchmark))
	}
	return sas
}

// SearchAttributeNames lists them for registration.
func SearchAttributeNames() []string {
	return []string{SATask.GetName(), SAAgent.GetName(), SABenchmark.GetName(), SAOutcome.GetName(), SAPhase.GetName()}
}

// Policy is how a run is driven; the starter fills it from config, so it is
// fixed in the workflow's input and replays identically.
type Policy struct {
	CheckpointInterval time.Duration
	HeartbeatTimeout   time.Duration
	Grace              time.Duration
	MaxInfraAttempts   int
	EvalAttempts       int
	// LeaseTimeout bounds the wait for a GPU slot before infra_failed.
	LeaseTimeout time.Duration
	// CheckpointAlertAfter failed checkpoints in a row mark the status stale.
	CheckpointAlertAfter int
	// EvalWaitLimit is how long a run whose evaluation failed waits for a
	// retry-evaluation update before it ends evaluation_failed.
	EvalWaitLimit time.Duration
	// Provision is how hosts are obtained: "" (static: workers someone
	// started) or "slurm" (a job per attempt and per evaluation).
	Provision string `json:",omitempty"`
	// ProvisionMargin is added to the budget left in a job's time limit:
	// restore, final checkpoint, hand-back.
	ProvisionMargin time.Duration `json:",omitempty"`
	// BootTimeout is how long a provisioned host may take to serve its
	// lease (its job or instance started, its worker polling); past it
	// the host is given back and another provisioned (0: 20 minutes).
	BootTimeout time.Duration `json:",omitempty"`
	// Curve replaces the task's curve marks; NoCurve scores none.
	Curve   []tasks.MarkTime `json:",omitempty"`
	NoCurve bool             `json:",omitempty"`
	// ReleaseAfter: a person's pause longer than this gives their GPU
	// back until they start again (human.release_after); PersonWaitLimit
	// is how long a person's run waits for them, at its start or after a
	// release, before it ends with what they left (human.wait_limit).
	ReleaseAfter    time.Duration `json:",omitempty"`
	PersonWaitLimit time.Duration `json:",omitempty"`
}

// MaxCheckpointsPerRun bounds the checkpoints a run's budget allows at
// its checkpoint interval: each is a signal in the run's history (and a
// line of its result), so a run stays far below Temporal's 51,200 events
// and 2 MB payloads. At 24 h it asks for an interval of 43.2 s or more.
const MaxCheckpointsPerRun = 2000

// CheckInterval tells whether the checkpoint interval suits a run of
// budget granted: at most MaxCheckpointsPerRun checkpoints.
func (p Policy) CheckInterval(granted time.Duration) error {
	if p.CheckpointInterval <= 0 {
		return fmt.Errorf("checkpoint.interval %s must be positive", p.CheckpointInterval)
	}
	if least := granted / MaxCheckpointsPerRun; p.CheckpointInterval < least {
		return fmt.Errorf("checkpoint.interval %s would take %d checkpoints in a budget of %s, over the %d a run's history holds well: set it to %s or more",
			p.CheckpointInterval, int64(granted/p.CheckpointInterval), granted, MaxCheckpointsPerRun, (least + time.Second - 1).Truncate(time.Second))
	}
	return nil
}

// defaultBootTimeout bounds a provisioned host's boot when the policy
// names none: a GPU instance or a queued Slurm job on a busy cluster
// takes minutes, a failed one never serves.
const defaultBootTimeout = 20 * time.Minute

// withDefaults fills what a policy left zero (an input from an older
// starter) with the least that works, once, where the run starts.
func (p Policy) withDefaults() Policy {
	// A run started from the UI or the CLI with these left zero would
	// wait for a lease forever, never notice a lost host, or run no
	// attempt at all.
	if p.HeartbeatTimeout <= 0 {
		p.HeartbeatTimeout = time.Minute // agent.heartbeat_timeout's default
	}
	if p.CheckpointInterval <= 0 {
		p.CheckpointInterval = 10 * time.Minute // checkpoint.interval's default
	}
	if p.LeaseTimeout <= 0 {
		p.LeaseTimeout = 24 * time.Hour
	}
	p.MaxInfraAttempts = max(1, p.MaxInfraAttempts)
	if p.BootTimeout <= 0 {
		p.BootTimeout = defaultBootTimeout
	}
	p.EvalAttempts = max(1, p.EvalAttempts)
	p.EvalWaitLimit = max(time.Second, p.EvalWaitLimit)
	p.CheckpointAlertAfter = max(1, p.CheckpointAlertAfter)
	if p.PersonWaitLimit <= 0 {
		p.PersonWaitLimit = 14 * 24 * time.Hour // human.wait_limit's default
	}
	return p
}

// Leaderboard is the part of the policy a leaderboard is stored with.
func (p Policy) Leaderboard() leaderboard.Policy {
	return leaderboard.Policy{CheckpointInterval: p.CheckpointInterval.String(), MaxInfraAttempts: p.MaxInfraAttempts, EvalAttempts: p.EvalAttempts}
}

// Extend is the extend update's argument.
type Extend struct {
	By time.Duration
}

// RetryEvaluation is the retry-evaluation update's argument.
type RetryEvaluation struct {
	// Image replaces the evaluator image (container runtime), e.g. a fixed one.
	Image string `json:"image,omitempty"`
}

// RunInput starts one run. It names secrets, never holds them.
type RunInput struct {
	Task      string
	Agent     string
	Seed      int64
	Benchmark string
	// TimeLimit overrides the task's limit when positive.
	TimeLimit time.Duration
	// LLMProvider is the agent's LLM vendor (agent.provider: openai or
	// anthropic). Its wire name stays "Provider": recorded inputs carry it.
	LLMProvider string `json:"Provider"`
	// Image is the image an image agent runs, by digest when its
	// benchmark pinned it ("": its definition's); runs from before
	// definitions name it with agent "mlrb".
	Image string
	// AgentDef is the agent's definition (nil: a run from before
	// definitions, whose Agent names a built-in agent or "mlrb").
	AgentDef *agents.Definition `json:",omitempty"`
	// Secrets names the worker-side secrets the agent gets as env; their
	// values never pass through Temporal.
	Secrets []string
	// LLMBudget bounds the run's LLM calls (nil: the task's llm_budget).
	LLMBudget *llm.Budget `json:",omitempty"`
	// ForkFrom starts the run from another run's checkpoint (an ablation).
	ForkFrom *ForkSource `json:",omitempty"`
	// ReplayOf names a finished run whose LLM transcript answers this
	// run's calls in place of the providers (`starter replay-calls`).
	ReplayOf string `json:",omitempty"`
	// Continue says this run id ran before (its benchmark is resumed):
	// carry on from its latest checkpoint, or only evaluate it when the
	// agent had already ended.
	Continue bool `json:",omitempty"`
	// Carried is what earlier executions of a continued run lost to
	// crashes, waited for infrastructure and were granted by extensions:
	// its ledger stays whole.
	Carried *budget.Account `json:",omitempty"`
	Policy  Policy
}

// ForkSource names the checkpoint a forked run starts from.
type ForkSource struct {
	RunID string
	Seq   int
}

// Status is the answer to the status query.
type Status struct {
	RunID            string     `json:"run_id"`
	Task             string     `json:"task"`
	Agent            string     `json:"agent"`
	Seed             int64      `json:"seed"`
	Phase            runs.Phase `json:"phase"`
	Attempt          int        `json:"attempt"`
	Checkpoints      int        `json:"checkpoints"`
	LastCheckpointAt time.Time  `json:"last_checkpoint_at"`
	// LastCheckpointAgentS is the agent time the last checkpoint covers.
	LastCheckpointAgentS float64   `json:"last_checkpoint_agent_s"`
	AttemptStartedAt     time.Time `json:"attempt_started_at"`
	// CheckpointFailures counts failed checkpoints since the last commit.
	CheckpointFailures int            `json:"checkpoint_failures"`
	CheckpointError    string         `json:"checkpoint_error,omitempty"`
	CheckpointStale    bool           `json:"checkpoint_stale"`
	CancelRequested    bool           `json:"cancel_requested"`
	Budget             budget.Account `json:"budget"`
	Outcome            runs.Outcome   `json:"outcome,omitempty"`
	Score              *float64       `json:"score,omitempty"`
	// Store is where the run's checkpoints and logs are.
	Store string `json:"store,omitempty"`
	// LeasingSince is when the run began waiting for a slot, while it
	// waits: the wait so far is infra wait the ledger has not counted yet.
	LeasingSince time.Time `json:"leasing_since,omitempty"`
	// Host is the host provisioned for the current attempt or evaluation
	// (its Slurm job), while it is held.
	Host *activities.ProvisionedHost `json:"host,omitempty"`
	// LLM is the run's LLM use through the gateway so far.
	LLM *RunLLM `json:"llm,omitempty"`
	// Curve is the run's score over time, as far as it is scored.
	Curve []runs.Mark `json:"curve,omitempty"`
	// Waiting says, while the run waits for an operator's retry, why and
	// what to do.
	Waiting *Waiting `json:"waiting,omitempty"`
	// AttemptHost is the host the current attempt runs on, while it runs
	// (where a person's shells open).
	AttemptHost string `json:"attempt_host,omitempty"`
	// Invited counts a person's run's invitations (starter invite).
	Invited int `json:"invited,omitempty"`
}

// Waiting is what a run waiting for an operator shows: the error its
// evaluation (or a mark's) ended on, where its log is, and the command
// that retries it in place.
type Waiting struct {
	Error string `json:"error"`
	Log   string `json:"log"`
	Retry string `json:"retry"`
	// Until is when the wait ends with the run evaluation_failed (or,
	// for a curve, finished with its final score).
	Until time.Time `json:"until"`
}

// ReachedAt estimates the agent seconds a running attempt has reached at
// now, from wall time since the later of its start and its last
// checkpoint (what the status shows between checkpoints, and what a run
// cut off at now lost).
func (s Status) ReachedAt(now time.Time) float64 {
	if s.Phase != runs.PhaseRunning || s.AttemptStartedAt.IsZero() {
		return s.Budget.UsedS
	}
	since := s.AttemptStartedAt
	if s.LastCheckpointAt.After(since) {
		since = s.LastCheckpointAt
	}
	return s.Budget.RanUntil(since, now)
}

// Cost is what a run consumed (see runs.Cost).
type Cost = runs.Cost
