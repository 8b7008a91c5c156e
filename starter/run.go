package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/app"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/internal/llm"
	"github.com/mlrb/mlrb/internal/runs"
	"github.com/mlrb/mlrb/workflows"
)

// runOptions are `starter run`'s flags.
type runOptions struct {
	task, agent, id, image string
	secrets                []string
	seed                   int64
	limit                  time.Duration
	wait, json             bool
	budget                 llm.Budget
}

func (o *runOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.task, "task", "", "task id (see `starter tasks list`)")
	f.StringVar(&o.agent, "agent", "reference", "agent: reference, noop, idle, or mlrb (an MLRB agent image)")
	f.StringVar(&o.image, "image", "", "agent image (agent mlrb)")
	f.StringSliceVar(&o.secrets, "secret", nil, "name of a worker-side secret to pass to the agent (repeatable; values stay on the worker)")
	f.Int64Var(&o.seed, "seed", 0, "seed (0 or more)")
	f.DurationVar(&o.limit, "time-limit", 0, "agent time budget (default: the task's)")
	f.StringVar(&o.id, "id", "", "run id (default: generated)")
	f.Float64Var(&o.budget.USD, "llm-budget-usd", 0, "the run's LLM budget in dollars, at the gateway's prices (default: the task's llm_budget)")
	f.Int64Var(&o.budget.Tokens, "llm-budget-tokens", 0, "the run's LLM budget in tokens (default: the task's)")
	config.AddFlags(f, append([]string{"agent.provider"}, cli.PolicyKeys...)...)
	f.BoolVar(&o.wait, "wait", false, "wait for the result")
	f.BoolVar(&o.json, "json", false, "print JSON")
}

func runCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run --task T --agent reference --seed N",
		Short: "start one run (prints its run id; --wait prints its result)",
		Args:  cobra.NoArgs,
		RunE:  run(func(g *globals, _ []string) error { return runRun(g, o) }),
	}
	o.AddFlags(cmd.Flags())
	_ = cmd.MarkFlagRequired("task")
	return cmd
}

// input checks the options against the catalog and the config, and makes
// the run's input and id.
func (o runOptions) input(g *globals) (string, workflows.RunInput, error) {
	cfg, cat, err := g.catalog()
	if err != nil {
		return "", workflows.RunInput{}, err
	}
	if _, err := checkRun(cat, app.Policy(cfg), o.task, o.agent, o.seed, o.limit); err != nil {
		return "", workflows.RunInput{}, err
	}
	secrets, err := checkAgentFlags(o.agent, o.image, cfg.Agent.Provider, o.secrets)
	if err != nil {
		return "", workflows.RunInput{}, err
	}
	if err := o.budget.Check(); err != nil {
		return "", workflows.RunInput{}, cli.Usagef("--llm-budget-%v", err)
	}
	id := o.id
	if id == "" {
		id = newRunID(o.task, o.seed)
	} else if err := checkID(id); err != nil {
		return "", workflows.RunInput{}, err
	}
	return id, workflows.RunInput{Task: o.task, Agent: o.agent, Seed: o.seed, TimeLimit: o.limit, LLMProvider: cfg.Agent.Provider,
		Image: o.image, Secrets: secrets, Policy: app.Policy(cfg), LLMBudget: o.runBudget()}, nil
}

// runBudget is the run's own LLM budget, nil when no flag set one (the
// task's then holds).
func (o runOptions) runBudget() *llm.Budget {
	if !o.budget.Set() {
		return nil
	}
	b := o.budget
	return &b
}

// startRun checks the options and starts the run.
func startRun(g *globals, o runOptions) (client.WorkflowRun, error) {
	id, in, err := o.input(g)
	if err != nil {
		return nil, err
	}
	c, err := g.client()
	if err != nil {
		return nil, err
	}
	run, err := c.ExecuteWorkflow(g.ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: g.cfg.Temporal.TaskQueue,
		Memo: map[string]any{"task": in.Task, "agent": in.Agent, "seed": in.Seed},
	}, workflows.RunWorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("start run: %w", err)
	}
	return run, nil
}

// runRun starts one run; with --wait it prints the run's result.
func runRun(g *globals, o runOptions) error {
	run, err := startRun(g, o)
	if err != nil {
		return err
	}
	if !o.wait {
		if o.json {
			return printJSON(g.out, map[string]string{"run_id": run.GetID()})
		}
		fmt.Fprintln(g.out, run.GetID())
		return nil
	}
	if !o.json {
		fmt.Fprintln(g.errOut, "started", run.GetID())
	}
	var res runs.Result
	if err := run.Get(g.ctx, &res); err != nil {
		return fmt.Errorf("run %s: %w", run.GetID(), err)
	}
	return printResult(g.out, &res, o.json)
}

func printResult(w io.Writer, r *runs.Result, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	score := "—"
	if r.Score != nil {
		score = fmt.Sprintf("%.4f", *r.Score)
	}
	fmt.Fprintf(w, "run        %s\ntask       %s (agent %s, seed %d)\noutcome    %s\nscore      %s\n", r.RunID, r.Task, r.Agent, r.Seed, r.Outcome, score)
	if r.Reason != "" {
		fmt.Fprintf(w, "reason     %s\n", cli.Printable(r.Reason))
	}
	fmt.Fprintf(w, "attempts   %d\ncheckpoints %d\nbudget     granted %.0fs, used %.1fs, lost %.1fs (refunded), infra wait %.1fs\nspec       %s\n",
		r.Attempts, r.Checkpoints, r.Budget.GrantedS(), r.Budget.UsedS, r.Budget.LostS, r.Budget.InfraWaitS, r.SpecHash)
	for _, v := range r.Violations {
		fmt.Fprintf(w, "violation  %s\n", v)
	}
	writeCurve(w, "curve      ", r.Curve)
	return nil
}
