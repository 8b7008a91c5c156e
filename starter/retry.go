package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/internal/runs"
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

// runRetryEval retries the evaluation of one run, or of every run of a
// benchmark that waits for it.
func runRetryEval(g *globals, o retryOptions, args []string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	if o.bench != "" {
		return retryBenchmark(g, c, o)
	}
	if o.curve {
		marks, err := retryCurve(g.ctx, c, args[0], o.image)
		if err != nil {
			return err
		}
		if o.json {
			return printJSON(g.out, marks)
		}
		writeCurve(g.out, "curve  ", marks)
		if failed := failedMarks(marks); failed > 0 {
			return fmt.Errorf("%d marks failed again; the run keeps waiting for another retry", failed)
		}
		return nil
	}
	att, err := retryOne(g.ctx, c, args[0], o.image)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(g.out, att)
	}
	if att.Score == nil {
		return fmt.Errorf("evaluation failed again (%s); the run keeps waiting for another retry", att.Error)
	}
	fmt.Fprintf(g.out, "scored %.4f with evaluator %s; the agent did not run again\n", *att.Score, att.Image)
	return nil
}

func retryBenchmark(g *globals, c client.Client, o retryOptions) error {
	phase := runs.PhaseAwaitingEvalRetry
	if o.curve {
		phase = runs.PhaseAwaitingCurveRetry
	}
	q := fmt.Sprintf("MlrbBenchmark = '%s' AND MlrbPhase = '%s' AND ExecutionStatus = 'Running'", o.bench, phase)
	resp, err := c.ListWorkflow(g.ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: 1000})
	if err != nil {
		return fmt.Errorf("list waiting runs of %s: %w", o.bench, err)
	}
	if len(resp.Executions) == 0 {
		fmt.Fprintf(g.out, "no run of %s is %s\n", o.bench, phase)
		return nil
	}
	bad := 0
	for _, e := range resp.Executions {
		id := e.Execution.WorkflowId
		if o.curve {
			marks, err := retryCurve(g.ctx, c, id, o.image)
			if err == nil && failedMarks(marks) > 0 {
				err = fmt.Errorf("%d marks failed again", failedMarks(marks))
			}
			if err != nil {
				bad++
				fmt.Fprintf(g.out, "%s: %v\n", id, err)
			} else {
				fmt.Fprintf(g.out, "%s: curve scored\n", id)
			}
			continue
		}
		att, err := retryOne(g.ctx, c, id, o.image)
		switch {
		case err != nil:
			bad++
			fmt.Fprintf(g.out, "%s: %v\n", id, err)
		case att.Score == nil:
			bad++
			fmt.Fprintf(g.out, "%s: failed again: %s\n", id, att.Error)
		default:
			fmt.Fprintf(g.out, "%s: scored %.4f\n", id, *att.Score)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d retries did not score", bad, len(resp.Executions))
	}
	return nil
}

func retryOne(ctx context.Context, c client.Client, runID, image string) (*runs.EvalAttempt, error) {
	var att runs.EvalAttempt
	if err := update(ctx, c, runID, workflows.UpdateRetryEvaluation, workflows.RetryEvaluation{Image: image}, &att); err != nil {
		return nil, err
	}
	return &att, nil
}

func retryCurve(ctx context.Context, c client.Client, runID, image string) ([]runs.Mark, error) {
	var marks []runs.Mark
	if err := update(ctx, c, runID, workflows.UpdateRetryCurve, workflows.RetryEvaluation{Image: image}, &marks); err != nil {
		return nil, err
	}
	return marks, nil
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
