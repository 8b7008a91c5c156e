// `starter benchmark`: its flags and what it does.

package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/workflows"
)

// benchmarkOptions are `starter benchmark`'s flags.
type benchmarkOptions struct {
	suite, id, format                 string
	agents, tasks                     []string
	seeds, concurrency, continueAfter int
	limit                             time.Duration
	budget                            llm.Budget
	wait                              bool
}

func (o *benchmarkOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.suite, "suite", "mini", "mini or full")
	f.StringSliceVar(&o.agents, "agents", []string{"reference"}, "agent definitions to compare (see starter agents list)")
	f.DurationVar(&o.limit, "time-limit", 0, "agent time budget of every run (default: each task's)")
	f.Float64Var(&o.budget.USD, "llm-budget-usd", 0, "each run's LLM budget in dollars (default: the agent's llm_budget_usd, else the task's)")
	f.Int64Var(&o.budget.Tokens, "llm-budget-tokens", 0, "each run's LLM budget in tokens")
	f.StringSliceVar(&o.tasks, "tasks", nil, "only these tasks (default: the whole suite)")
	f.IntVar(&o.seeds, "seeds", 5, "seeds per task and agent")
	f.IntVar(&o.concurrency, "concurrency", workflows.DefaultConcurrency, "runs at once")
	f.IntVar(&o.continueAfter, "continue-after", workflows.DefaultContinueAfter, "runs one execution of the benchmark starts before it continues as new (bounds its history)")
	f.StringVar(&o.id, "id", "", "benchmark id (default: generated)")
	f.BoolVar(&o.wait, "wait", false, "wait and print the leaderboard")
	f.StringVar(&o.format, "format", "table", "with --wait: table, md, csv, json or svg")
	config.AddFlags(f, cli.PolicyKeys...)
}

func benchmarkCmd() *cobra.Command {
	var o benchmarkOptions
	cmd := &cobra.Command{
		Use:   "benchmark --suite mini|full --agents A[,B] --seeds N",
		Short: "start a benchmark: every agent × task × seed as child runs with deterministic ids",
		Args:  cobra.NoArgs,
		RunE:  run(func(g *globals, _ []string) error { return runBenchmark(g, o) }),
	}
	o.AddFlags(cmd.Flags())
	cmd.AddCommand(benchmarkResumeCmd(), benchmarkExtendCmd())
	return cmd
}

// checkNumbers checks the options that need neither catalog nor config.
func (o benchmarkOptions) checkNumbers() error {
	switch {
	case o.suite != "mini" && o.suite != "full":
		return cli.Usagef("--suite: %q is not mini or full", o.suite)
	case o.seeds < 1 || o.concurrency < 1:
		return cli.Usagef("--seeds and --concurrency must be at least 1")
	case o.continueAfter < 1:
		return cli.Usagef("--continue-after: %d must be at least 1", o.continueAfter)
	}
	if err := o.budget.Check(); err != nil {
		return cli.Usagef("--llm-budget-%v", err)
	}
	return checkFormat(o.format)
}

// input checks the options against the catalog and the config, and makes
// the benchmark's input and id: the one place a benchmark's input is
// built from flags.
func (o benchmarkOptions) input(g *globals) (string, workflows.BenchmarkInput, error) {
	var in workflows.BenchmarkInput
	cfg, cat, err := g.catalog()
	if err != nil {
		return "", in, err
	}
	if err := o.checkNumbers(); err != nil {
		return "", in, err
	}
	ids := o.tasks
	if len(ids) == 0 {
		ids = cat.IDs(o.suite)
	}
	if err := checkDistinct("--tasks", ids); err != nil {
		return "", in, err
	}
	if err := checkDistinct("--agents", o.agents); err != nil {
		return "", in, err
	}
	defs, err := agentsOf(g, "--agents", o.agents)
	if err != nil {
		return "", in, err
	}
	for _, d := range defs {
		if err := checkSecrets("--agents: agent "+d.Name+": secrets", d.Secrets, cfg.Agent.SecretNames, cfg.Gateway.OpenAIKey, cfg.Gateway.AnthropicKey); err != nil {
			return "", in, err
		}
		for _, t := range ids {
			if _, err := checkRun("--agents", cat, app.Policy(cfg), t, d, 0, o.limit); err != nil {
				return "", in, err
			}
		}
	}
	id := o.id
	if id == "" {
		id = fmt.Sprintf("bench-%s-%s", o.suite, time.Now().UTC().Format("20060102-150405"))
	} else if err := checkID(id); err != nil {
		return "", in, err
	}
	run := workflows.RunInput{LLMProvider: cfg.Agent.Provider, Policy: app.Policy(cfg), TimeLimit: o.limit}
	if o.budget.Set() {
		b := o.budget
		run.LLMBudget = &b
	}
	for _, w := range curveWarnings(cat, app.Policy(cfg), ids, o.limit) {
		fmt.Fprintln(g.errOut, w)
	}
	in = workflows.NewBenchmarkInput(ids, defs, o.seeds, o.concurrency, run)
	in.ContinueAfter = o.continueAfter
	return id, in, nil
}

// runBenchmark starts a benchmark; with --wait it prints its leaderboard.
func runBenchmark(g *globals, o benchmarkOptions) error {
	id, in, err := o.input(g)
	if err != nil {
		return err
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	run, err := c.ExecuteWorkflow(g.ctx, client.StartWorkflowOptions{ID: id, TaskQueue: g.cfg.Temporal.TaskQueue,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		// A benchmark id names one set of runs: never start it twice.
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, workflows.BenchmarkWorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return cli.Usagef("benchmark %s was already started; its runs are not started twice (see `starter results %s`)", id, id)
	}
	if err != nil {
		return fmt.Errorf("start benchmark: %w", err)
	}
	fmt.Fprintln(g.out, run.GetID())
	if !o.wait {
		return nil
	}
	return awaitLeaderboard(g, run, o.format)
}
