// `starter run`: its flags and what it does.

package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/process/show"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/workflows"
)

// runOptions are `starter run`'s flags.
type runOptions struct {
	task, agent, id, image string
	label, model           string
	secrets                []string
	seed                   int64
	limit                  time.Duration
	wait, json             bool
	budget                 llm.Budget
}

func (o *runOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.task, "task", "", "task id (see `starter tasks list`)")
	f.StringVar(&o.agent, "agent", "reference", "agent definition to run (see starter agents list)")
	f.StringVar(&o.image, "image", "", "a one-off agent image instead of a definition (needs --label)")
	f.StringVar(&o.label, "label", "", "with --image: the one-off agent's name on the leaderboard")
	f.StringVar(&o.model, "model", "", "with --image: the model given to the agent (MLRB_MODEL)")
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
	def, err := o.definition(g)
	if err != nil {
		return "", workflows.RunInput{}, err
	}
	if _, err := checkRun("--agent", cat, app.Policy(cfg), o.task, def, o.seed, o.limit); err != nil {
		return "", workflows.RunInput{}, err
	}
	if err := checkSecrets("--secret", append(slices.Clone(o.secrets), def.Secrets...), cfg.Agent.SecretNames, cfg.Gateway.OpenAIKey, cfg.Gateway.AnthropicKey); err != nil {
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
	return id, workflows.RunInput{Task: o.task, Agent: def.Name, AgentDef: &def, Seed: o.seed, TimeLimit: o.limit, LLMProvider: cfg.Agent.Provider,
		Secrets: o.secrets, Policy: app.Policy(cfg), LLMBudget: def.Budget(&o.budget)}, nil
}

// definition is the agent the run runs: a definition from the catalogue
// (--agent), or a one-off image (--image, named by --label).
func (o runOptions) definition(g *globals) (agents.Definition, error) {
	agentSet := g.cmd.Flags().Changed("agent")
	switch {
	case o.image == "" && (o.label != "" || o.model != ""):
		return agents.Definition{}, cli.Usagef("--label and --model go with --image (a one-off image); a defined agent has its own (`starter agents show %s`)", o.agent)
	case o.image == "":
		defs, err := agentsOf(g, "--agent", []string{o.agent})
		if err != nil {
			return agents.Definition{}, err
		}
		return defs[0], nil
	case agentSet:
		return agents.Definition{}, cli.Usagef("--image: give --agent NAME (a definition) or --image with --label (a one-off image), not both")
	case o.label == "":
		return agents.Definition{}, cli.Usagef("--image: name the one-off agent with --label NAME (the leaderboard groups runs by it), or define it in agents.dir (`starter agents list`)")
	}
	cfg, err := g.config()
	if err != nil {
		return agents.Definition{}, err
	}
	// As MLRB's run.sh, the Hugging Face token; the provider's key never
	// reaches the agent: the gateway gives it a token for its calls.
	def := agents.Definition{Name: o.label, Image: o.image, Provider: cfg.Agent.Provider, Model: o.model, Secrets: []string{"HUGGINGFACE_TOKEN"},
		Description: "one-off image run (starter run --image)"}
	if err := def.Validate(); err != nil {
		return def, cli.Usagef("--image/--label/--model/--provider: %v", err)
	}
	return def, nil
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
	run, err := app.StartRun(g.ctx, c, g.cfg.Temporal.TaskQueue, id, in, nil)
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
	if err := await(g, run, &res); err != nil {
		return fmt.Errorf("run %s: %w", run.GetID(), err)
	}
	withResearch(g, &res)
	return printResult(g.out, &res, o.json)
}

// printResult prints a run's result, as JSON with asJSON.
func printResult(w io.Writer, r *runs.Result, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	show.WriteResult(w, r)
	return nil
}
