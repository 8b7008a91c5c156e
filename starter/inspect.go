// `starter status` and `starter inspect`: what a run is doing.

package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/process/show"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/workflows"
)

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
	v := show.StatusOf(st, time.Now())
	if p, name := activityProgress(g.ctx, c, id); name != "" {
		v.Step, v.Disk = name+": "+p.String(), p.DiskWarning()
	}
	if o.json {
		return printJSON(g.out, v)
	}
	show.WriteStatus(g.out, v)
	return nil
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
			show.StatusName(e.Status), sa["MlrbPhase"], sa["MlrbOutcome"], e.StartTime.AsTime().Local().Format("2006-01-02 15:04:05"))
	})
	if err != nil {
		return cli.Usagef("list runs: %v", err)
	}
	return tw.Flush()
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
