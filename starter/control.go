// `starter cancel` and the other signals to a run.

package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/workflows"
)

func cancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN_ID",
		Short: "stop a run gracefully: SIGTERM, a final checkpoint, then the run ends canceled",
		Args:  cobra.ExactArgs(1),
		RunE:  run(func(g *globals, args []string) error { return runCancel(g, args[0]) }),
	}
}

// runCancel asks a running run to stop.
func runCancel(g *globals, id string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	if err := mustBeRunning(g.ctx, c, id); err != nil {
		return err
	}
	if err := update(g.ctx, c, id, workflows.UpdateCancel, nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(g.out, "cancel of %s requested: the agent gets SIGTERM within seconds, then a final checkpoint\n", id)
	return nil
}

// extendOptions are `starter extend`'s flags.
type extendOptions struct{ by time.Duration }

func (o *extendOptions) AddFlags(f *pflag.FlagSet) { f.DurationVar(&o.by, "by", 0, "extra agent time") }

func (o extendOptions) check() error {
	if o.by <= 0 {
		return cli.Usagef("--by: give a positive duration, e.g. 2h")
	}
	return nil
}

func extendCmd() *cobra.Command {
	var o extendOptions
	cmd := &cobra.Command{
		Use:     "extend RUN_ID --by D",
		Short:   "grant a run more agent time",
		Args:    cobra.ExactArgs(1),
		PreRunE: func(*cobra.Command, []string) error { return o.check() },
		RunE:    run(func(g *globals, args []string) error { return runExtend(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runExtend grants a running run more agent time.
func runExtend(g *globals, o extendOptions, id string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	if err := mustBeRunning(g.ctx, c, id); err != nil {
		return err
	}
	var l budget.Account
	if err := update(g.ctx, c, id, workflows.UpdateExtend, workflows.Extend{By: o.by}, &l); err != nil {
		return err
	}
	fmt.Fprintf(g.out, "%s: granted %.0fs in all, %.0fs not yet used\n", id, l.GrantedS(), l.Left())
	return nil
}
