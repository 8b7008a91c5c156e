// The wire: activity names, their inputs and results, heartbeats and error types.

// Package activities is the wire between the workflows and every side
// effect of a run: activity names, their inputs and results, heartbeats
// and error types, each recorded in histories (a name never changes).
// The side effects are its packages by concern, each with only its own
// dependencies: host (leases, liveness), attempt (an agent run),
// evaluation (a model scored) and records (tasks, hosts, results).
// Activities hold no orchestration logic; the workflows decide. It
// stands on floor 7, over the wings of internal/.
package activities

import (
	"fmt"
	"time"

	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

// Names under which activities are registered; they read well in the
// Web UI's event history.
const (
	ResolveTaskName    = "ResolveTask"
	LoadCheckpointName = "LoadCheckpoint"
	AcquireLeaseName   = "AcquireLease"
	ReleaseLeaseName   = "ReleaseLease"
	RunAgentName       = "RunAgent"
	ProvisionHostName  = "ProvisionHost"
	ReleaseHostName    = "ReleaseHost"
	EvaluateName       = "Evaluate"
	PickMarksName      = "PickMarks"
	ResolveAgentsName  = "ResolveAgents"
)

// SignalCheckpoint is how a committed checkpoint reaches the workflow: the
// agent activity sends one per commit, in commit order, and delivers
// every one before it returns, so the workflow has the checkpoints of an
// attempt (its hand-back one included) by the time it sees the attempt
// end. The final one comes in the attempt's result instead when its input
// says so (AgentInput.LastInResult).
const SignalCheckpoint = "checkpoint-committed"

// QuerySteering is the run's query the agent activity polls for the
// operator's controls.
const QuerySteering = "steering"

// Steering is the answer to QuerySteering.
type Steering struct {
	// GrantedS is the run's budget in all, extensions included.
	GrantedS        float64
	CancelRequested bool
}

// SignalUsage carries an attempt's LLM ledger to the run: every few
// seconds while it has changed, once more before the attempt ends (all
// delivered before it returns; or in its result, LastInResult), and, from a new attempt, the ledgers of
// the run's earlier attempts as their transcripts hold them (a crashed
// attempt's last calls included).
const SignalUsage = "llm-usage"

// UsageReport is the payload of SignalUsage: an attempt's ledger so far.
type UsageReport struct {
	Attempt int        `json:"attempt"`
	Ledger  llm.Ledger `json:"ledger"`
	// Prices names the table the ledger was costed with.
	Prices llm.PriceRef `json:"prices"`
}

// SignalCheckpointFailed reports failed checkpoints (the agent keeps
// running); the run's status shows how many in a row and why.
const SignalCheckpointFailed = "checkpoint-failed"

// CheckpointFailure is the payload of SignalCheckpointFailed.
type CheckpointFailure struct {
	Consecutive int       `json:"consecutive"`
	Error       string    `json:"error"`
	At          time.Time `json:"at"`
	From        int       `json:"from,omitempty"` // the attempt that failed
}

// Error types the workflow tells apart.
const (
	// ErrNoModel: the agent left no model to evaluate (an agent failure).
	ErrNoModel = "NoModel"
	// ErrModelBrokeEvaluator: the evaluator crashed or hung on the run's
	// model and then scored a control model in the same place: the model
	// broke it (an agent failure, once the retries agree).
	ErrModelBrokeEvaluator = "ModelBrokeEvaluator"
	// ErrBadTask: the task cannot run as configured (never retried).
	ErrBadTask = "BadTask"
	// ErrNoCapacity: no GPU slot free on this host right now (retried).
	ErrNoCapacity = "NoCapacity"
	// ErrAgentKilled: the agent was killed from outside; its details carry
	// the agent's Heartbeat. The workflow runs another attempt.
	ErrAgentKilled = "AgentKilled"
	// ErrFencedAttempt: a later attempt of the run owns its checkpoints;
	// this one must not run.
	ErrFencedAttempt = "FencedAttempt"
)

// CheckpointSource names a committed checkpoint of a run.
type CheckpointSource struct {
	RunID string
	// Seq 0 is the run's latest kept checkpoint.
	Seq int
	// IfAny makes a run without checkpoints a nil answer, not an error.
	IfAny bool
}

// ResolveInput names the task to resolve.
type ResolveInput struct {
	Task  string
	Agent string
	Image string
	// AgentDef is the run's agent (nil: a run from before definitions,
	// whose Agent and Image say it).
	AgentDef *agents.Definition `json:",omitempty"`
}

// ResolvedTask is the spec the run uses and its content hash.
type ResolvedTask struct {
	Spec tasks.Spec
	Hash string
	// Store is where the workers keep the run's checkpoints and logs
	// (fs:/dir, s3://bucket/prefix), for the commands that read them.
	Store string `json:",omitempty"`
	// AgentImage is an image agent's image by digest: the run's attempts
	// all run it, wherever its tag moves meanwhile.
	AgentImage string `json:",omitempty"`
}

// LeaseRequest asks for a GPU slot for one attempt.
type LeaseRequest struct {
	RunID    string
	Attempt  int
	GPUCount int
	GPUType  string
	// Role is what the slot is for: "" an agent attempt,
	// runs.RoleEvaluation an evaluation (Attempt then counts evaluations).
	Role string `json:",omitempty"`
	// AtOnce asks for a slot free now: a full host answers NoCapacity
	// without first asking the server which of its holders have ended
	// (a call per holder), and the run waits for a slot through the queue.
	AtOnce bool `json:",omitempty"`
}

// Lease is a granted slot. Token fences it: run id and attempt.
type Lease struct {
	HostID    string
	HostQueue string
	Devices   []int
	Token     string
}

// CheckpointRef is a committed checkpoint.
type CheckpointRef struct {
	// RunID is the run the checkpoint belongs to when it is not this one
	// (a fork starts from another run's checkpoint).
	RunID        string    `json:"run_id,omitempty"`
	Seq          int       `json:"seq"`
	Attempt      int       `json:"attempt"`
	AgentSeconds float64   `json:"agent_seconds"`
	At           time.Time `json:"at"`
	Files        int       `json:"files"`
	Bytes        int64     `json:"bytes"`
	NewBytes     int64     `json:"new_bytes"`
	Final        bool      `json:"final"`
	// Ending is how the agent ended, on a final checkpoint.
	Ending *checkpoint.Ending `json:"ending,omitempty"`
	// From is the attempt that reported the checkpoint (0 in histories
	// from before fencing): the run ignores a superseded attempt's.
	From int `json:"from,omitempty"`
	// LastAttempt is, on a run's latest checkpoint, the last attempt
	// that owned the run (it may have committed nothing): a continued
	// run numbers its attempts after it.
	LastAttempt int `json:"last_attempt,omitempty"`
}

// HostRequest asks for a host for one attempt (or one evaluation: Role).
type HostRequest struct {
	Kind     string // provision.kind
	RunID    string
	Attempt  int
	Role     string `json:",omitempty"`
	GPUType  string
	GPUCount int
	// TimeLimit is how long the host may live.
	TimeLimit time.Duration
}

// ProvisionedHost is a host obtained for one attempt: the provider's id
// for it (a Slurm job id) and the host queue its worker polls.
type ProvisionedHost struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	HostID    string `json:"host_id"`
	HostQueue string `json:"host_queue"`
}

// AgentInput is one attempt of the agent.
type AgentInput struct {
	RunID   string
	Attempt int
	Task    tasks.Spec
	Agent   string
	Seed    int64
	// LLMProvider is the agent's LLM vendor (wire name "Provider").
	LLMProvider string `json:"Provider"`
	Image       string
	Secrets     []string
	// AgentDef is the run's agent (nil: a run from before definitions).
	AgentDef *agents.Definition `json:",omitempty"`
	Lease    Lease
	// Budget is the run's ledger at the attempt's start (its deadlines).
	Budget   budget.Account
	Resume   *CheckpointRef
	NextSeq  int
	Interval time.Duration
	Grace    time.Duration
	// LLMBudget bounds the run's LLM calls, all its attempts together.
	LLMBudget llm.Budget `json:",omitzero"`
	// ReplayOf: a finished run whose transcript answers the LLM calls.
	ReplayOf string `json:",omitempty"`
	// Marks are the run's curve marks in agent seconds: retention keeps
	// the checkpoints next to them for the curve's evaluations.
	Marks []float64 `json:",omitempty"`
	// KeepLease: an attempt that ends keeps its lease (the run's
	// evaluations run on it); else it gives the lease back itself.
	KeepLease bool `json:",omitempty"`
	// LastInResult: an attempt that ends returns its final checkpoint and
	// its final LLM ledger (AgentResult.Final, Usage) instead of
	// signalling them, which would cost the run a workflow task of its
	// own. Earlier ones, and a handed-back attempt's, are signalled.
	LastInResult bool `json:",omitempty"`
	// ReleaseAfter: a person's pause longer than this ends the attempt
	// with a checkpoint and gives its lease back (StopReleased); 0: never.
	ReleaseAfter time.Duration `json:",omitempty"`
	// ClockRunning: the person asked for this attempt (task start), so
	// their clock runs from its start; else it starts paused.
	ClockRunning bool `json:",omitempty"`
}

// Heartbeat is the heartbeat detail of the agent and evaluation
// activities, and the detail of an attempt handed back (ErrAgentKilled):
// the agent time reached, and the step under way with its progress.
type Heartbeat struct {
	AgentSeconds float64 `json:"agent_seconds"`
	Step         string  `json:"step,omitempty"`
	DoneBytes    int64   `json:"done_bytes,omitempty"`
	TotalBytes   int64   `json:"total_bytes,omitempty"`
	// Host and FreeBytes: where the activity runs and the space left on
	// its work disk.
	Host      string `json:"host,omitempty"`
	FreeBytes int64  `json:"free_bytes,omitempty"`
	// Released: a handed-back attempt gave its lease back itself (its
	// host may be going away), so the run need not.
	Released bool `json:"released,omitempty"`
}

// LowDisk is free space under which the status warns: less than a
// large model's weights.
const LowDisk = 20 << 30

// DiskWarning says the host's disk runs low, or "".
func (p Heartbeat) DiskWarning() string {
	if p.Host == "" || p.FreeBytes >= LowDisk {
		return ""
	}
	return fmt.Sprintf("low: %.1f GiB free on host %s", gib(p.FreeBytes), p.Host)
}

// StopReason is how an agent attempt stopped.
type StopReason string

// How an agent attempt stopped.
const (
	StopExited   StopReason = "exited"   // the agent ended on its own
	StopDeadline StopReason = "deadline" // SIGTERM at the soft deadline, or killed at the hard one
	StopCanceled StopReason = "canceled" // an operator asked for a graceful stop
	// StopReleased: a person paused past their release_after; the attempt
	// checkpointed and gave its lease back until they start again.
	StopReleased StopReason = "released"
	// StopLLMBudget: the run's LLM budget was spent; the agent got the
	// soft stop of a deadline (SIGTERM, then kill after the grace).
	StopLLMBudget StopReason = "llm_budget"
)

// AgentResult is how an attempt ended. Its checkpoints reached the
// workflow as signals before it did, but for the final one and the final
// ledger when the input asked for them here (LastInResult).
type AgentResult struct {
	StoppedBy    StopReason
	ExitCode     int
	Signal       int
	OOMKilled    bool
	Reason       string
	AgentSeconds float64
	// Image is the agent image's digest (container runtime only).
	Image string
	// Released: the attempt gave its lease back itself.
	Released bool `json:",omitempty"`
	// Final is the attempt's final checkpoint and Usage its final ledger
	// (nil: signalled, or no change since the last report).
	Final *CheckpointRef `json:",omitempty"`
	Usage *UsageReport   `json:",omitempty"`
	// PausedS is the time a person's clock was paused in the attempt
	// (never agent time); Notes what they wrote with `task note`.
	PausedS float64         `json:",omitempty"`
	Notes   []contract.Note `json:",omitempty"`
}

// EvalInput asks to score a run's final checkpoint.
type EvalInput struct {
	RunID string
	Task  tasks.Spec
	Seed  int64
	Final CheckpointRef
	// Image overrides the configured evaluator image.
	Image string
	// Lease is the GPU slot the evaluation holds on this host; its devices
	// are the only ones the evaluator sees (nil: none).
	Lease *Lease `json:",omitempty"`
	// Mark: Final is a checkpoint on the run's curve, scored by the
	// task's curve command when it names one (its dev split).
	Mark bool `json:",omitempty"`
	// N numbers the final model's evaluations (a retry-eval's is the next):
	// each keeps its log and results apart (0: from before they were
	// numbered).
	N int `json:",omitempty"`
	// AlsoMark: once the final model is scored, the curve command scores
	// the same restored model too (a mark stands for the final checkpoint
	// on the dev split): one restore of a 20 GB checkpoint, not two.
	AlsoMark bool `json:",omitempty"`
	// AgentImage is the image the run's agent ran ("": none, or the
	// built-in one): the scored model's weights are compared with its
	// files.
	AgentImage string `json:",omitempty"`
	// Release: the run needs the slot no more once this evaluation (and
	// its mark) succeeds, so the evaluation gives the lease back itself.
	Release bool `json:",omitempty"`
}

// MarkScore is the curve command's answer for the final checkpoint
// (EvalInput.AlsoMark); Error set: the run evaluates that mark the usual
// way, where a failure is judged.
type MarkScore struct {
	Score float64
	Error string `json:",omitempty"`
}

// EvalResult is a scored model.
type EvalResult struct {
	Score      float64
	Metrics    map[string]float64
	ModelPath  string
	Params     int64
	Violations []string
	// Flags are findings that do not disqualify (an unmodified reference
	// model).
	Flags []string `json:",omitempty"`
	// Provenance is what the evaluator scored against (its held-out
	// set's hash).
	Provenance map[string]string `json:",omitempty"`
	// ResultsFile is the blob key of the evaluator's results file.
	ResultsFile string
	// Image is the evaluator image's digest (container runtime only).
	Image string
	// ImageCopies are the model's weight files the agent's image holds.
	ImageCopies []runs.ImageCopy `json:",omitempty"`
	// ImageNotCompared says why the weights were not all compared.
	ImageNotCompared string `json:",omitempty"`
	// Usage is the LLM usage the agent reported, if it did.
	Usage *contract.SelfReport
	// Mark is the curve command's score of the same model (AlsoMark).
	Mark *MarkScore `json:",omitempty"`
	// Released: the evaluation gave its lease back (Release).
	Released bool `json:",omitempty"`
}

// EvaluatorLogName is the kept log's name in its evaluation's directory.
const EvaluatorLogName = "evaluator.log"

// MaxPausesPerAttempt bounds the time a person's attempt may spend
// paused, in release_afters, however short each pause: past it the next
// pause releases the attempt, so that the activity's timeout stays
// bounded (AgentInput.ReleaseAfter).
const MaxPausesPerAttempt = 3
