package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/workflows"
)

func cancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN_ID",
		Short: "stop a run gracefully: SIGTERM, a final checkpoint, then the run ends canceled",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c client.Client, _ *config.Config, args []string) error {
			if err := mustBeRunning(ctx, c, args[0]); err != nil {
				return err
			}
			if err := update(ctx, c, args[0], workflows.UpdateCancel, nil, nil); err != nil {
				return err
			}
			fmt.Printf("cancel of %s requested: the agent gets SIGTERM within seconds, then a final checkpoint\n", args[0])
			return nil
		}),
	}
}

func extendCmd() *cobra.Command {
	var by time.Duration
	cmd := &cobra.Command{
		Use:   "extend RUN_ID --by D",
		Short: "grant a run more agent time",
		Args:  cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error {
			if by <= 0 {
				return cli.Usagef("--by: give a positive duration, e.g. 2h")
			}
			return nil
		},
		RunE: withClient(func(ctx context.Context, c client.Client, _ *config.Config, args []string) error {
			if err := mustBeRunning(ctx, c, args[0]); err != nil {
				return err
			}
			var l workflows.Ledger
			if err := update(ctx, c, args[0], workflows.UpdateExtend, workflows.Extend{By: by}, &l); err != nil {
				return err
			}
			fmt.Printf("%s: granted %.0fs in all, %.0fs not yet used\n", args[0], l.GrantedS(), l.Left())
			return nil
		}),
	}
	cmd.Flags().DurationVar(&by, "by", 0, "extra agent time")
	return cmd
}
