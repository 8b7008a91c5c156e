// A run's status as `starter status` shows it: the live view, why it waits, its curve.

// Package show renders what the starter's commands show of runs and
// benchmarks: a run's live status, its result and curve, a benchmark's
// progress. The commands assemble what to show; this package says how it
// reads, and its tests hold it.
package show

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/workflows"
)

// Status is `starter status --json`: the query's state plus live figures the
// workflow cannot compute without a clock.
type Status struct {
	RunID              string     `json:"run_id"`
	Task               string     `json:"task"`
	Phase              runs.Phase `json:"phase"`
	Attempt            int        `json:"attempt"`
	Checkpoints        int        `json:"checkpoints"`
	LastCheckpointAgeS *float64   `json:"last_checkpoint_age_s"`
	// LastCheckpointAt is when the last checkpoint committed (absent
	// before the first): the instant the age counts from.
	LastCheckpointAt   *time.Time     `json:"last_checkpoint_at,omitempty"`
	BudgetLeftS        float64        `json:"budget_left_s"`
	Outcome            runs.Outcome   `json:"outcome,omitempty"`
	Score              *float64       `json:"score,omitempty"`
	Budget             budget.Account `json:"budget"`
	CheckpointFailures int            `json:"checkpoint_failures"`
	CheckpointStale    bool           `json:"checkpoint_stale"`
	CheckpointError    string         `json:"checkpoint_error,omitempty"`
	// Step is what the run's agent or evaluation activity is doing, from
	// its last heartbeat ("restoring 4.1 of 19.8 GiB").
	Step string `json:"step,omitempty"`
	// Disk warns when the host's work disk runs low.
	Disk string `json:"disk,omitempty"`
	// LeaseWaitS is how long the run has been waiting for a slot, while
	// it waits (also counted in budget.infra_wait_s).
	LeaseWaitS *float64 `json:"lease_wait_s,omitempty"`
	// Curve is the run's score over time, as far as it is scored.
	Curve []runs.Mark `json:"curve,omitempty"`
	// Waiting is why a run waits for an operator, and what to do.
	Waiting *workflows.Waiting `json:"waiting,omitempty"`
}

// StatusOf is st as seen at now.
func StatusOf(st workflows.Status, now time.Time) Status {
	v := Status{RunID: st.RunID, Task: st.Task, Phase: st.Phase, Attempt: st.Attempt, Checkpoints: st.Checkpoints, Outcome: st.Outcome, Score: st.Score, Budget: st.Budget,
		CheckpointFailures: st.CheckpointFailures, CheckpointStale: st.CheckpointStale, CheckpointError: st.CheckpointError, Curve: st.Curve, Waiting: st.Waiting}
	if !st.LastCheckpointAt.IsZero() {
		age := math.Round(now.Sub(st.LastCheckpointAt).Seconds()*10) / 10
		v.LastCheckpointAgeS = &age
		at := st.LastCheckpointAt
		v.LastCheckpointAt = &at
	}
	if !st.LeasingSince.IsZero() {
		// The wait in progress, which the ledger counts once it ends.
		wait := math.Round(now.Sub(st.LeasingSince).Seconds()*10) / 10
		v.LeaseWaitS = &wait
		v.Budget.InfraWaitS += max(0, wait)
	}
	left := st.Budget.GrantedS() - st.ReachedAt(now)
	v.BudgetLeftS = math.Max(0, math.Round(left*10)/10)
	return v
}

// WriteStatus prints v as `starter status` does.
func WriteStatus(w io.Writer, v Status) {
	age := "none yet"
	if v.LastCheckpointAgeS != nil {
		age = fmt.Sprintf("%.1fs ago", *v.LastCheckpointAgeS)
	}
	fmt.Fprintf(w, "run          %s (%s)\nphase        %s\nattempt      %d\ncheckpoints  %d (last %s)\nbudget left  %.1fs of %.0fs (lost %.1fs refunded, infra wait %.1fs)\n",
		v.RunID, v.Task, v.Phase, v.Attempt, v.Checkpoints, age, v.BudgetLeftS, v.Budget.GrantedS(), v.Budget.LostS, v.Budget.InfraWaitS)
	if v.Step != "" {
		fmt.Fprintf(w, "step         %s\n", v.Step)
	}
	if v.LeaseWaitS != nil {
		fmt.Fprintf(w, "waiting      %.0fs for a GPU slot\n", *v.LeaseWaitS)
	}
	if v.Phase == runs.PhaseAwaitingPerson {
		fmt.Fprintf(w, "waiting      for its person (no GPU held; paused %.0fs so far): `starter invite %s --label NAME` lets them in\n", v.Budget.PausedS, v.RunID)
	}
	if v.Disk != "" {
		fmt.Fprintf(w, "disk         %s\n", v.Disk)
	}
	if v.CheckpointFailures > 0 {
		stale := ""
		if v.CheckpointStale {
			stale = "STALE: "
		}
		fmt.Fprintf(w, "checkpoint   %s%d failed in a row: %s\n", stale, v.CheckpointFailures, cli.Printable(v.CheckpointError))
	}
	if v.Outcome != "" {
		fmt.Fprintf(w, "outcome      %s\n", v.Outcome)
	}
	WriteWaiting(w, "", v.Waiting)
	WriteCurve(w, "curve        ", v.Curve)
}

// WriteWaiting prints why a run waits for an operator and what to do.
func WriteWaiting(w io.Writer, indent string, wt *workflows.Waiting) {
	if wt == nil {
		return
	}
	fmt.Fprintf(w, "%swaiting      for a retry until %s: %s\n%s  its log:   %s\n%s  retry:     %s\n", indent, wt.Until.UTC().Format(time.RFC3339),
		cli.Printable(wt.Error), indent, wt.Log, indent, wt.Retry)
}

// WriteCurve prints a run's marks, one line each: the mark, the
// checkpoint and its agent time, the score and the best so far.
func WriteCurve(w io.Writer, label string, marks []runs.Mark) {
	for i, m := range marks {
		if i > 0 {
			label = strings.Repeat(" ", len(label))
		}
		what := "pending"
		switch {
		case m.Score != nil:
			what = fmt.Sprintf("%.4f (best %.4f)", *m.Score, *m.Best)
		case m.NoModel != "":
			what = "no model yet"
		case m.Error != "":
			what = "failed after " + strconv.Itoa(m.Tries) + " tries: " + cli.Printable(m.Error)
		}
		at := "no checkpoint"
		if m.Seq > 0 {
			at = fmt.Sprintf("#%d at %s", m.Seq, time.Duration(m.AgentS*float64(time.Second)).Round(time.Second))
		}
		if m.Later() {
			what += " (the model of a later checkpoint: none by the mark)"
		}
		fmt.Fprintf(w, "%s%-9s %-18s %s %s\n", label, time.Duration(m.AtS*float64(time.Second)).Round(time.Second), at, m.Split, what)
	}
}

// StatusName is a workflow's status in the starter's words.
func StatusName(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	}
	return s.String()
}
