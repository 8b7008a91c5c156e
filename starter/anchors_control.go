// `starter anchors control`: its flags and what it does.

package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/results/controls"
)

// anchorsControlOptions are `starter anchors control`'s flags.
type anchorsControlOptions struct{ run string }

func (o *anchorsControlOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.run, "run", "", "a scored run of the task (no rule broken) whose final model becomes the control (required)")
}

func anchorsControlCmd() *cobra.Command {
	var o anchorsControlOptions
	cmd := &cobra.Command{
		Use:   "control TASK --run RUN_ID",
		Short: "choose the model that tells a broken evaluator from a model that breaks it (a baseline measured here sets one)",
		Args:  cobra.ExactArgs(1),
		RunE:  run(func(g *globals, args []string) error { return runAnchorsControl(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runAnchorsControl makes a scored run's final model the control of its
// task's evaluator (the one that scored it), replacing any.
func runAnchorsControl(g *globals, o anchorsControlOptions, task string) error {
	if o.run == "" {
		return cli.Usagef("anchors control: --run RUN_ID is required (a scored run of %s)", task)
	}
	cfg, cat, err := g.catalog()
	if err != nil {
		return err
	}
	spec, err := cat.Get(task)
	if err != nil {
		return cli.Usagef("anchors control: %v", err)
	}
	if spec.Reference != nil {
		return cli.Usagef("anchors control: %s is a mini task: its untrained reference model is its control", task)
	}
	store, err := g.store()
	if err != nil {
		return err
	}
	engine := app.Engine(store, cfg)
	c, err := controls.Set(g.ctx, engine, spec, o.run, "the operator "+whoAmI())
	if err != nil {
		return cli.Usagef("anchors control: %v", err)
	}
	fmt.Fprintf(g.out, "the control of %s for evaluator %s is run %s's model (%s, checkpoint #%d, %.1f MiB, scored %.6g)\n",
		task, c.Evaluator, c.RunID, c.ModelPath, c.Seq, float64(c.Bytes)/(1<<20), c.Score)
	return nil
}
