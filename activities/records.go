// The records' wire: names and inputs of storing results and anchors, aggregating and planning, and of picking marks.

package activities

import (
	"encoding/json"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/tasks"
)

// Names of the activities that keep a benchmark's results out of its
// payloads: runs store their results, the leaderboard reads them back.
const (
	StoreResultName      = "StoreResult"
	AggregateResultsName = "AggregateResults"
	AwaitRunsName        = "AwaitRuns"
	ReadPlanName         = "ReadPlan"
)

// Provision kinds beyond static.
const (
	ProvisionKindSlurm = "slurm"
	ProvisionKindEC2   = "ec2"
)

// AggregateName is the leaderboard activity.
const AggregateName = "Aggregate"

// AggregateInput is a finished benchmark's runs.
type AggregateInput struct {
	BenchmarkID string
	Runs        []leaderboard.Entry
	Setup       leaderboard.Setup
}

// StoreAnchorName is the wire name of StoreAnchor.
const StoreAnchorName = "StoreAnchor"

// StoreAnchorInput is a measured anchor: task's of role.
type StoreAnchorInput struct {
	Task   string
	Role   string
	Anchor tasks.Anchor
}

// StoreResultInput is a finished run's result, as JSON.
type StoreResultInput struct {
	RunID  string
	Result json.RawMessage
}

// AggregateResultsInput names a benchmark's runs by their matrix, never
// by a list that grows with the benchmark.
type AggregateResultsInput struct {
	Runs   runresults.Matrix
	Policy leaderboard.Policy
}

// AggregateResult is the stored leaderboard's keys and its setup.
type AggregateResult struct {
	Keys  []string
	Setup leaderboard.Setup
	// Missing counts runs with no stored result: cut off (terminated,
	// failed) before they stored one; the leaderboard counts them
	// infra_failed.
	Missing int
}

// ReadPlanInput asks for the plan entries of some runs.
type ReadPlanInput struct {
	Key    string
	RunIDs []string
}

// MarksInput asks which checkpoints a run's curve scores.
type MarksInput struct {
	RunID string
	// Marks are in agent seconds, ascending.
	Marks []float64
	// Final is the checkpoint the run's final evaluation scored: no
	// later one counts (a zombie's never does).
	Final CheckpointRef
	// SlackS is how long after a mark a checkpoint may be taken and still
	// stand for it (the checkpoint interval: the one due at the mark may
	// commit late); a mark with none at or before it, nor within the
	// slack after it, had no checkpoint yet.
	SlackS float64
}
