package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/app"
	"github.com/mlrb/mlrb/internal/blob"
	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/workflows"
)

func forkCmd() *cobra.Command {
	var seq int
	var id string
	var wait, asJSON bool
	cmd := &cobra.Command{
		Use:   "fork RUN_ID --from-checkpoint N",
		Short: "start a new run of the same task, agent and seed from one of a run's checkpoints (for ablations)",
		Args:  cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			if seq < 1 {
				return cli.Usagef("--from-checkpoint: give a checkpoint sequence number (see `starter checkpoint list %s`)", args[0])
			}
			return nil
		},
		RunE: withClient(func(ctx context.Context, c client.Client, cfg *config.Config, args []string) error {
			store, err := runStore(ctx, cfg, args[0], func(s blob.Store) (bool, error) {
				_, err := checkpoint.New(s, checkpoint.Options{ChunkSize: cfg.Checkpoint.ChunkSize}).Load(ctx, args[0], seq)
				return err == nil, nil
			})
			if err != nil {
				return err
			}
			if _, err := checkpoint.New(store, checkpoint.Options{ChunkSize: cfg.Checkpoint.ChunkSize}).Load(ctx, args[0], seq); err != nil {
				return cli.Usagef("--from-checkpoint: %v (see `starter checkpoint list %s`)", err, args[0])
			}
			// The fork runs what the source ran: its agent, image, provider
			// and the names of its secrets.
			var src workflows.RunInput
			if err := startInput(ctx, c, args[0], &src); err != nil {
				return notFound(err, args[0])
			}
			if id == "" {
				id = fmt.Sprintf("%s-fork%d-%s", args[0], seq, randomSuffix())
			} else if err := checkID(id); err != nil {
				return err
			}
			in := workflows.RunInput{Task: src.Task, Agent: src.Agent, Seed: src.Seed, TimeLimit: src.TimeLimit, Provider: src.Provider, Image: src.Image, Secrets: src.Secrets,
				ForkFrom: &workflows.ForkSource{RunID: args[0], Seq: seq}, Policy: app.Policy(cfg)}
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: cfg.Temporal.TaskQueue,
				Memo: map[string]any{"task": src.Task, "agent": src.Agent, "seed": src.Seed, "forked_from": fmt.Sprintf("%s#%d", args[0], seq)}},
				workflows.RunWorkflowName, in)
			if err != nil {
				return fmt.Errorf("start fork: %w", err)
			}
			if !wait {
				fmt.Println(run.GetID())
				return nil
			}
			var res workflows.RunResult
			if err := run.Get(ctx, &res); err != nil {
				return fmt.Errorf("fork %s: %w", run.GetID(), err)
			}
			return printResult(&res, asJSON)
		}),
	}
	cmd.Flags().IntVar(&seq, "from-checkpoint", 0, "checkpoint sequence number to start from")
	cmd.Flags().StringVar(&id, "id", "", "id of the new run (default: derived)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the result")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
