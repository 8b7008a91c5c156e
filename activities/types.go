// Package activities holds every side effect of a run: resolving the task,
// leasing a GPU slot, running the agent, checkpointing, evaluating.
// Activities hold no orchestration logic; the workflows decide.
package activities

import (
	"time"

	"github.com/mlrb/mlrb/internal/checkpoint"
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
	EvaluateName       = "Evaluate"
)

// SignalCheckpoint is sent by the agent activity to its workflow when a
// checkpoint commits, so the workflow keeps the last committed checkpoint
// in its own state, not only in heartbeat details.
const SignalCheckpoint = "checkpoint-committed"

// QuerySteering is the run's query the agent activity polls for the
// operator's controls.
const QuerySteering = "steering"

// Steering is the answer to QuerySteering.
type Steering struct {
	GrantedS        float64
	CancelRequested bool
}

// SignalCheckpointFailed reports failed checkpoints (the agent keeps
// running); the run's status shows how many in a row and why.
const SignalCheckpointFailed = "checkpoint-failed"

// CheckpointFailure is the payload of SignalCheckpointFailed.
type CheckpointFailure struct {
	Consecutive int       `json:"consecutive"`
	Error       string    `json:"error"`
	At          time.Time `json:"at"`
}

// Error types the workflow tells apart.
const (
	// ErrNoModel: the agent left no model to evaluate (an agent failure).
	ErrNoModel = "NoModel"
	// ErrBadTask: the task cannot run as configured (never retried).
	ErrBadTask = "BadTask"
	// ErrNoCapacity: no GPU slot free on this host right now (retried).
	ErrNoCapacity = "NoCapacity"
	// ErrAgentKilled: the agent was killed from outside; its details carry
	// the agent's Progress. The workflow runs another attempt.
	ErrAgentKilled = "AgentKilled"
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
}

// ResolvedTask is the spec the run uses and its content hash.
type ResolvedTask struct {
	Spec tasks.Spec
	Hash string
}

// LeaseRequest asks for a GPU slot for one attempt.
type LeaseRequest struct {
	RunID    string
	Attempt  int
	GPUCount int
	GPUType  string
}

// Lease is a granted slot. Token fences it: run id and attempt.
type Lease struct {
	HostID    string
	HostQueue string
	Devices   []int
	Token     string
	Waited    time.Duration
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
}

// AgentInput is one attempt of the agent.
type AgentInput struct {
	RunID    string
	Attempt  int
	Task     tasks.Spec
	Agent    string
	Seed     int64
	Provider string
	Image    string
	Secrets  []string
	Lease    Lease
	// UsedSeconds is the agent time preserved so far; BudgetSeconds the
	// time granted in all.
	UsedSeconds   float64
	BudgetSeconds float64
	Resume        *CheckpointRef
	NextSeq       int
	Interval      time.Duration
	Grace         time.Duration
}

// Progress is the agent activity's heartbeat detail.
type Progress struct {
	AgentSeconds   float64 `json:"agent_seconds"`
	LastCheckpoint int     `json:"last_checkpoint"`
	LogOffset      int64   `json:"log_offset"`
	// Checkpoint is the one taken of an agent stopped under the attempt
	// (killed from outside, or its worker stopping), handed back with it.
	Checkpoint *CheckpointRef `json:"checkpoint,omitempty"`
}

// How an agent attempt stopped.
const (
	StopExited   = "exited"   // the agent ended on its own
	StopDeadline = "deadline" // SIGTERM at the soft deadline, or killed at the hard one
	StopCanceled = "canceled" // an operator asked for a graceful stop
)

// AgentResult is how an attempt ended.
type AgentResult struct {
	StoppedBy    string
	ExitCode     int
	Signal       int
	OOMKilled    bool
	Reason       string
	AgentSeconds float64
	Checkpoints  []CheckpointRef
	// Image is the agent image's digest (container runtime only).
	Image string
}

// EvalInput asks to score a run's final checkpoint.
type EvalInput struct {
	RunID string
	Task  tasks.Spec
	Seed  int64
	Final CheckpointRef
	// Image overrides the configured evaluator image.
	Image string
}

// EvalResult is a scored model.
type EvalResult struct {
	Score       float64
	Metrics     map[string]float64
	ModelPath   string
	Params      int64
	Violations  []string
	ResultsFile string
	// Image is the evaluator image's digest (container runtime only).
	Image string
	// Usage is the LLM usage the agent reported, if it did.
	Usage *Usage
}

// Usage is $MLRB_OUTPUT_DIR/usage.json as agents write it.
type Usage struct {
	InputTokens  *int64   `json:"input_tokens"`
	OutputTokens *int64   `json:"output_tokens"`
	CostUSD      *float64 `json:"cost_usd"`
}
