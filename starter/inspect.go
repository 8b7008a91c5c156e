package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/workflows"
)

// statusView is `status --json`: the query's state plus live figures the
// workflow cannot compute without a clock.
type statusView struct {
	RunID              string          `json:"run_id"`
	Task               string          `json:"task"`
	Phase              workflows.Phase `json:"phase"`
	Attempt            int             `json:"attempt"`
	Checkpoints        int             `json:"checkpoints"`
	LastCheckpointAgeS *float64        `json:"last_checkpoint_age_s"`
	// LastCheckpointAt is when the last checkpoint committed (absent
	// before the first): the instant the age counts from.
	LastCheckpointAt   *time.Time        `json:"last_checkpoint_at,omitempty"`
	BudgetLeftS        float64           `json:"budget_left_s"`
	Outcome            workflows.Outcome `json:"outcome,omitempty"`
	Score              *float64          `json:"score,omitempty"`
	Budget             workflows.Ledger  `json:"budget"`
	CheckpointFailures int               `json:"checkpoint_failures"`
	CheckpointStale    bool              `json:"checkpoint_stale"`
	CheckpointError    string            `json:"checkpoint_error,omitempty"`
	// Step is what the run's agent or evaluation activity is doing, from
	// its last heartbeat ("restoring 4.1 of 19.8 GiB").
	Step string `json:"step,omitempty"`
	// Disk warns when the host's work disk runs low.
	Disk string `json:"disk,omitempty"`
	// LeaseWaitS is how long the run has been waiting for a slot, while
	// it waits (also counted in budget.infra_wait_s).
	LeaseWaitS *float64 `json:"lease_wait_s,omitempty"`
}

func view(st workflows.Status, now time.Time) statusView {
	v := statusView{RunID: st.RunID, Task: st.Task, Phase: st.Phase, Attempt: st.Attempt, Checkpoints: st.Checkpoints, Outcome: st.Outcome, Score: st.Score, Budget: st.Budget,
		CheckpointFailures: st.CheckpointFailures, CheckpointStale: st.CheckpointStale, CheckpointError: st.CheckpointError}
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
func activityProgress(ctx context.Context, c client.Client, runID string) (activities.Progress, string) {
	var p activities.Progress
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

func statusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status RUN_ID",
		Short: "show a run's live status (phase, attempt, checkpoints, budget left)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c client.Client, _ *config.Config, args []string) error {
			st, err := queryStatus(ctx, c, args[0])
			if err != nil {
				return err
			}
			v := view(st, time.Now())
			if p, name := activityProgress(ctx, c, args[0]); name != "" {
				v.Step, v.Disk = name+": "+p.String(), p.DiskWarning()
			}
			if asJSON {
				return printJSON(v)
			}
			age := "none yet"
			if v.LastCheckpointAgeS != nil {
				age = fmt.Sprintf("%.1fs ago", *v.LastCheckpointAgeS)
			}
			fmt.Printf("run          %s (%s)\nphase        %s\nattempt      %d\ncheckpoints  %d (last %s)\nbudget left  %.1fs of %.0fs (lost %.1fs refunded, infra wait %.1fs)\n",
				v.RunID, v.Task, v.Phase, v.Attempt, v.Checkpoints, age, v.BudgetLeftS, v.Budget.GrantedS(), v.Budget.LostS, v.Budget.InfraWaitS)
			if v.Step != "" {
				fmt.Printf("step         %s\n", v.Step)
			}
			if v.LeaseWaitS != nil {
				fmt.Printf("waiting      %.0fs for a GPU slot\n", *v.LeaseWaitS)
			}
			if v.Disk != "" {
				fmt.Printf("disk         %s\n", v.Disk)
			}
			if v.CheckpointFailures > 0 {
				stale := ""
				if v.CheckpointStale {
					stale = "STALE: "
				}
				fmt.Printf("checkpoint   %s%d failed in a row: %s\n", stale, v.CheckpointFailures, cli.Printable(v.CheckpointError))
			}
			if v.Outcome != "" {
				fmt.Printf("outcome      %s\n", v.Outcome)
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func resultCmd() *cobra.Command {
	var asJSON, wait bool
	cmd := &cobra.Command{
		Use:   "result RUN_ID",
		Short: "print a finished run's result (--wait to wait for it)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c client.Client, _ *config.Config, args []string) error {
			busy, _, err := running(ctx, c, args[0])
			if err != nil {
				return err
			}
			if busy && !wait {
				return fmt.Errorf("run %s is still running (see `starter status %s`, or add --wait)", args[0], args[0])
			}
			var res workflows.RunResult
			if err := c.GetWorkflow(ctx, args[0], "").Get(ctx, &res); err != nil {
				return fmt.Errorf("run %s: %w", args[0], err)
			}
			return printResult(&res, asJSON)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait if the run is still going")
	return cmd
}

func listCmd() *cobra.Command {
	var query string
	var limit int
	var benchmarks bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list runs, newest first (filter with --query, e.g. 'MlrbTask=\"mini_baby_lm\"')",
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c client.Client, _ *config.Config, _ []string) error {
			kind := workflows.RunWorkflowName
			if benchmarks {
				kind = workflows.BenchmarkWorkflowName
			}
			q := fmt.Sprintf("WorkflowType = '%s'", kind)
			if query != "" {
				q += " AND " + query
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN ID\tTASK\tAGENT\tSTATUS\tPHASE\tOUTCOME\tSTARTED")
			var token []byte
			n := 0
			for n < limit {
				resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token, PageSize: int32(min(100, limit))})
				if err != nil {
					return cli.Usagef("list runs: %v", err)
				}
				for _, e := range resp.Executions {
					sa := searchAttrs(e.SearchAttributes.GetIndexedFields())
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Execution.WorkflowId, sa["MlrbTask"], sa["MlrbAgent"],
						statusName(e.Status), sa["MlrbPhase"], sa["MlrbOutcome"], e.StartTime.AsTime().Local().Format("2006-01-02 15:04:05"))
					n++
				}
				token = resp.NextPageToken
				if len(token) == 0 {
					break
				}
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().StringVar(&query, "query", "", "extra visibility query")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs")
	cmd.Flags().BoolVar(&benchmarks, "benchmarks", false, "list benchmarks instead of runs")
	return cmd
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
