package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/workflows"
)

func retryEvalCmd() *cobra.Command {
	var image, bench string
	var asJSON, failed bool
	cmd := &cobra.Command{
		Use:   "retry-eval RUN_ID | --benchmark ID --failed",
		Short: "re-run only the evaluation of runs waiting after failed evaluations (optionally with a new evaluator image)",
		Args:  cobra.MaximumNArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			if (len(args) == 1) == (bench != "") || (bench != "" && !failed) {
				return cli.Usagef("give a RUN_ID, or --benchmark ID --failed")
			}
			return nil
		},
		RunE: withClient(func(ctx context.Context, c client.Client, _ *config.Config, args []string) error {
			if bench != "" {
				q := fmt.Sprintf("MlrbBenchmark = '%s' AND MlrbPhase = '%s' AND ExecutionStatus = 'Running'", bench, workflows.PhaseAwaitingEvalRetry)
				resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, PageSize: 1000})
				if err != nil {
					return fmt.Errorf("list waiting runs of %s: %w", bench, err)
				}
				if len(resp.Executions) == 0 {
					fmt.Printf("no run of %s is waiting for an evaluation retry\n", bench)
					return nil
				}
				bad := 0
				for _, e := range resp.Executions {
					att, err := retryOne(ctx, c, e.Execution.WorkflowId, image)
					switch {
					case err != nil:
						bad++
						fmt.Printf("%s: %v\n", e.Execution.WorkflowId, err)
					case att.Score == nil:
						bad++
						fmt.Printf("%s: failed again: %s\n", e.Execution.WorkflowId, att.Error)
					default:
						fmt.Printf("%s: scored %.4f\n", e.Execution.WorkflowId, *att.Score)
					}
				}
				if bad > 0 {
					return fmt.Errorf("%d of %d retries did not score", bad, len(resp.Executions))
				}
				return nil
			}
			att, err := retryOne(ctx, c, args[0], image)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(att)
			}
			if att.Score == nil {
				return fmt.Errorf("evaluation failed again (%s); the run keeps waiting for another retry", att.Error)
			}
			fmt.Printf("scored %.4f with evaluator %s; the agent did not run again\n", *att.Score, att.Image)
			return nil
		}),
	}
	cmd.Flags().StringVar(&image, "image", "", "evaluator image to use instead of the configured one")
	cmd.Flags().StringVar(&bench, "benchmark", "", "retry every waiting run of this benchmark (with --failed)")
	cmd.Flags().BoolVar(&failed, "failed", false, "with --benchmark: the runs whose evaluation failed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func retryOne(ctx context.Context, c client.Client, runID, image string) (*workflows.EvalAttempt, error) {
	var att workflows.EvalAttempt
	if err := update(ctx, c, runID, workflows.UpdateRetryEvaluation, workflows.RetryEvaluation{Image: image}, &att); err != nil {
		return nil, err
	}
	return &att, nil
}
