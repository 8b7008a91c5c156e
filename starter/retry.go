// `starter retry-eval`: its flags and what it does.

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/process/show"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/workflows"
)

// retryOptions are `starter retry-eval`'s flags.
type retryOptions struct {
	image, bench        string
	json, failed, curve bool
}

func (o *retryOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.image, "image", "", "evaluator image to use instead of the configured one")
	f.StringVar(&o.bench, "benchmark", "", "retry every waiting run of this benchmark (with --failed)")
	f.BoolVar(&o.failed, "failed", false, "with --benchmark: the runs whose evaluation failed")
	f.BoolVar(&o.curve, "curve", false, "retry the curve's marks whose evaluations failed (runs awaiting_curve_retry), not the final evaluation")
	f.BoolVar(&o.json, "json", false, "print JSON")
}

func (o retryOptions) check(args []string) error {
	if (len(args) == 1) == (o.bench != "") || (o.bench != "" && !o.failed) {
		return cli.Usagef("give a RUN_ID, or --benchmark ID --failed")
	}
	return nil
}

func retryEvalCmd() *cobra.Command {
	var o retryOptions
	cmd := &cobra.Command{
		Use:     "retry-eval RUN_ID | --benchmark ID --failed",
		Short:   "re-run only the evaluation of runs waiting after failed evaluations (optionally with a new evaluator image)",
		Args:    cobra.MaximumNArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error { return o.check(args) },
		RunE:    run(func(g *globals, args []string) error { return runRetryEval(g, o, args) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runRetryEval retries the evaluation (or the curve) of one run, or of
// every run of a benchmark that waits for it.
func runRetryEval(g *globals, o retryOptions, args []string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	if o.bench != "" {
		return retryBenchmark(g, c, o)
	}
	res, line, err := retryRun(g.ctx, c, args[0], o)
	if o.json && res != nil {
		return printJSON(g.out, res)
	}
	if err != nil {
		return err
	}
	fmt.Fprint(g.out, line)
	return nil
}

func retryBenchmark(g *globals, c client.Client, o retryOptions) error {
	phase := runs.PhaseAwaitingEvalRetry
	if o.curve {
		phase = runs.PhaseAwaitingCurveRetry
	}
	q := fmt.Sprintf("MlrbBenchmark = '%s' AND MlrbPhase = '%s' AND ExecutionStatus = 'Running'", o.bench, phase)
	var ids []string
	if err := listAll(g.ctx, c, q, 0, func(e *workflowpb.WorkflowExecutionInfo) { ids = append(ids, e.Execution.WorkflowId) }); err != nil {
		return fmt.Errorf("waiting runs of %s: %w", o.bench, err)
	}
	if len(ids) == 0 {
		fmt.Fprintf(g.out, "no run of %s is %s\n", o.bench, phase)
		return nil
	}
	bad := 0
	for _, id := range ids {
		if _, line, err := retryRun(g.ctx, c, id, o); err != nil {
			bad++
			fmt.Fprintf(g.out, "%s: %v\n", id, err)
		} else {
			fmt.Fprintf(g.out, "%s: %s", id, line)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d retries did not score", bad, len(ids))
	}
	return nil
}

// retryRun retries one run's evaluation, or its curve's failed marks,
// through the run's update: it returns the update's answer (nil if the
// run refused it), what it came to as text, and an error if it did not
// score.
func retryRun(ctx context.Context, c client.Client, runID string, o retryOptions) (any, string, error) {
	arg := workflows.RetryEvaluation{Image: o.image}
	if o.curve {
		var marks []runs.Mark
		if err := update(ctx, c, runID, workflows.UpdateRetryCurve, arg, &marks); err != nil {
			return nil, "", err
		}
		var b strings.Builder
		show.WriteCurve(&b, "curve  ", marks)
		if n := failedMarks(marks); n > 0 {
			return marks, b.String(), fmt.Errorf("%d marks failed again; the run keeps waiting for another retry", n)
		}
		return marks, "curve scored; the agent did not run again\n" + b.String(), nil
	}
	var att runs.EvalAttempt
	if err := update(ctx, c, runID, workflows.UpdateRetryEvaluation, arg, &att); err != nil {
		return nil, "", err
	}
	if att.Score == nil {
		return att, "", fmt.Errorf("evaluation failed again (%s); the run keeps waiting for another retry", att.Error)
	}
	return att, fmt.Sprintf("scored %.4f with evaluator %s; the agent did not run again\n", *att.Score, att.Image), nil
}

func failedMarks(marks []runs.Mark) int {
	n := 0
	for _, m := range marks {
		if !m.Done() {
			n++
		}
	}
	return n
}
