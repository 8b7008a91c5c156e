// `starter fork`: its flags and what it does.

package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/workflows"
)

// forkOptions are `starter fork`'s flags.
type forkOptions struct {
	seq        int
	id         string
	wait, json bool
}

func (o *forkOptions) AddFlags(f *pflag.FlagSet) {
	f.IntVar(&o.seq, "from-checkpoint", 0, "checkpoint sequence number to start from")
	f.StringVar(&o.id, "id", "", "id of the new run (default: derived)")
	f.BoolVar(&o.wait, "wait", false, "wait for the result")
	f.BoolVar(&o.json, "json", false, "print JSON")
}

func (o forkOptions) check(source string) error {
	if o.seq < 1 {
		return cli.Usagef("--from-checkpoint: give a checkpoint sequence number (see `starter checkpoint list %s`)", source)
	}
	if o.id != "" {
		return checkID(o.id)
	}
	return nil
}

func forkCmd() *cobra.Command {
	var o forkOptions
	cmd := &cobra.Command{
		Use:     "fork RUN_ID --from-checkpoint N",
		Short:   "start a new run of the same task, agent and seed from one of a run's checkpoints (for ablations)",
		Args:    cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error { return o.check(args[0]) },
		RunE:    run(func(g *globals, args []string) error { return runFork(g, o, args[0]) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runFork starts a run from checkpoint o.seq of source: the fork runs
// what the source ran (its agent, image, provider and the names of its
// secrets).
func runFork(g *globals, o forkOptions, source string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	cfg := g.cfg
	store, err := runStore(g, source, func(s blob.Store) (bool, error) {
		_, err := app.Engine(s, cfg).Load(g.ctx, source, o.seq)
		return err == nil, nil
	})
	if err != nil {
		return err
	}
	if _, err := app.Engine(store, cfg).Load(g.ctx, source, o.seq); err != nil {
		return cli.Usagef("--from-checkpoint: %v (see `starter checkpoint list %s`)", err, source)
	}
	var src workflows.RunInput
	if err := startInput(g.ctx, c, source, &src); err != nil {
		return notFound(err, source)
	}
	id := o.id
	if id == "" {
		id = fmt.Sprintf("%s-fork%d-%s", source, o.seq, randomSuffix())
	}
	in := sameAgent(src, cfg)
	in.ForkFrom = &workflows.ForkSource{RunID: source, Seq: o.seq}
	run, err := app.StartRun(g.ctx, c, cfg.Temporal.TaskQueue, id, in, map[string]any{"forked_from": fmt.Sprintf("%s#%d", source, o.seq)})
	if err != nil {
		return fmt.Errorf("start fork: %w", err)
	}
	if !o.wait {
		fmt.Fprintln(g.out, run.GetID())
		return nil
	}
	var res runs.Result
	if err := await(g, run, &res); err != nil {
		return fmt.Errorf("fork %s: %w", run.GetID(), err)
	}
	withResearch(g, &res)
	return printResult(g.out, &res, o.json)
}

// sameAgent is a new run of what src ran: its task, seed and budget, its
// agent whole (definition, image, provider, secrets' names, LLM budget),
// under this config's policy.
func sameAgent(src workflows.RunInput, cfg *config.Config) workflows.RunInput {
	in := workflows.RunInput{Task: src.Task, Agent: src.Agent, Seed: src.Seed, TimeLimit: src.TimeLimit, LLMProvider: src.LLMProvider, Image: src.Image,
		Secrets: src.Secrets, LLMBudget: src.LLMBudget, Policy: app.Policy(cfg)}
	if src.AgentDef != nil {
		d := *src.AgentDef
		in.AgentDef = &d
	}
	return in
}
