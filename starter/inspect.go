// `starter status` and `starter inspect`: what a run is doing.

package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/workflows"
)

// statusView is `status --json`: the query's state plus live figures the
// workflow cannot compute without a clock.
type statusView struct {
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

func view(st workflows.Status, now time.Time) statusView {
	v := statusView{RunID: st.RunID, Task: st.Task, Phase: st.Phase, Attempt: st.Attempt, Checkpoints: st.Checkpoints, Outcome: st.Outcome, Score: st.Score, Budget: st.Budget,
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

// activityProgress is the last heartbeat of a run's agent or evaluation
// activity under way, and the activity's name ("" when none is).
func activityProgress(ctx context.Context, c client.Client, runID string) (activities.Heartbeat, string) {
	var p activities.Heartbeat
	d, err := c.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		return p, ""
	}
	for _, pa := range d.PendingActivities {
		if pa.GetHeartbeatDetails() == nil {
			continue
		}
		if converter.GetDefaultDataConverter().FromPayloads(pa.GetHeartbeatDetails(), &p) == nil && p.Step != "" {
			return p, pa.GetActivityType().GetName()
		}
	}
	return p, ""
}

// statusOptions are `starter status`'s flags.
type statusOptions struct{ json bool }

func (o *statusOptions) AddFlags(f *pflag.FlagSet) { f.BoolVar(&o.json, "json", false, "print JSON") }

func statusCmd() *cobra.Command {
	var o statusOptions
	cmd := &cobra.Command{
		Use:   "status RUN_ID",
		Short: "show a run's live status (phase, attempt, checkpoints, budget left)",
		Args:  cobra.ExactArgs(1),
		RunE:  run(func(g *globals, args []string) error { return runStatus(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runStatus prints a run's live status.
func runStatus(g *globals, o statusOptions, id string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	if err := mustBeRun(g, c, id, "watch"); err != nil {
		return err
	}
	st, err := queryStatus(g.ctx, c, id)
	if err != nil {
		return err
	}
	v := view(st, time.Now())
	if p, name := activityProgress(g.ctx, c, id); name != "" {
		v.Step, v.Disk = name+": "+p.String(), p.DiskWarning()
	}
	if o.json {
		return printJSON(g.out, v)
	}
	writeStatus(g.out, v)
	return nil
}

func writeStatus(w io.Writer, v statusView) {
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
	writeWaiting(w, "", v.Waiting)
	writeCurve(w, "curve        ", v.Curve)
}

// writeWaiting prints why a run waits for an operator and what to do.
func writeWaiting(w io.Writer, indent string, wt *workflows.Waiting) {
	if wt == nil {
		return
	}
	fmt.Fprintf(w, "%swaiting      for a retry until %s: %s\n%s  its log:   %s\n%s  retry:     %s\n", indent, wt.Until.UTC().Format(time.RFC3339),
		cli.Printable(wt.Error), indent, wt.Log, indent, wt.Retry)
}

// writeCurve prints a run's marks, one line each: the mark, the
// checkpoint and its agent time, the score and the best so far.
func writeCurve(w io.Writer, label string, marks []runs.Mark) {
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

// resultOptions are `starter result`'s flags.
type resultOptions struct{ json, wait bool }

func (o *resultOptions) AddFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.BoolVar(&o.wait, "wait", false, "wait if the run is still going")
}

func resultCmd() *cobra.Command {
	var o resultOptions
	cmd := &cobra.Command{
		Use:   "result RUN_ID",
		Short: "print a finished run's result (--wait to wait for it)",
		Args:  cobra.ExactArgs(1),
		RunE:  run(func(g *globals, args []string) error { return runResult(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runResult prints a run's result.
func runResult(g *globals, o resultOptions, id string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	if err := mustBeRun(g, c, id, "results"); err != nil {
		return err
	}
	busy, _, err := running(g.ctx, c, id)
	if err != nil {
		return err
	}
	if busy && !o.wait {
		return fmt.Errorf("run %s is still running (see `starter status %s`, or add --wait)", id, id)
	}
	var res runs.Result
	if err := await(g, c.GetWorkflow(g.ctx, id, ""), &res); err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	withResearch(g, &res)
	return printResult(g.out, &res, o.json)
}

// listOptions are `starter list`'s flags.
type listOptions struct {
	query      string
	limit      int
	benchmarks bool
}

func (o *listOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.query, "query", "", "extra visibility query")
	f.IntVar(&o.limit, "limit", 50, "at most this many runs")
	f.BoolVar(&o.benchmarks, "benchmarks", false, "list benchmarks instead of runs")
}

func listCmd() *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list runs, newest first (filter with --query, e.g. 'MlrbTask=\"mini_baby_lm\"')",
		Args:  cobra.NoArgs,
		RunE:  run(func(g *globals, _ []string) error { return runList(g, o) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runList lists runs or benchmarks, newest first.
func runList(g *globals, o listOptions) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	kind := workflows.RunWorkflowName
	if o.benchmarks {
		kind = workflows.BenchmarkWorkflowName
	}
	q := fmt.Sprintf("WorkflowType = '%s'", kind)
	if o.query != "" {
		q += " AND " + o.query
	}
	tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN ID\tTASK\tAGENT\tSTATUS\tPHASE\tOUTCOME\tSTARTED")
	err = listAll(g.ctx, c, q, o.limit, func(e *workflowpb.WorkflowExecutionInfo) {
		sa := searchAttrs(e.SearchAttributes.GetIndexedFields())
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Execution.WorkflowId, sa["MlrbTask"], sa["MlrbAgent"],
			statusName(e.Status), sa["MlrbPhase"], sa["MlrbOutcome"], e.StartTime.AsTime().Local().Format("2006-01-02 15:04:05"))
	})
	if err != nil {
		return cli.Usagef("list runs: %v", err)
	}
	return tw.Flush()
}

func statusName(s enumspb.WorkflowExecutionStatus) string {
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

func searchAttrs(fields map[string]*commonpb.Payload) map[string]string {
	out := map[string]string{}
	for k, p := range fields {
		var s string
		if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err == nil {
			out[k] = s
		}
	}
	return out
}
