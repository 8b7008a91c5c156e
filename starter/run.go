package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/app"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/internal/contract"
	"github.com/mlrb/mlrb/tasks"
	"github.com/mlrb/mlrb/workflows"
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$`)

// checkID refuses an id the runs' keys cannot hold: a run id names its
// store prefix and a benchmark's children are <id>/<agent>/<task>/s<seed>.
func checkID(id string) error {
	if !idPattern.MatchString(id) || strings.Contains(id, "..") {
		return cli.Usagef("--id: %q may hold letters, digits, '.', '_' and '-' only (no '/', no '..')", id)
	}
	return nil
}

// checkDistinct refuses a list that names something twice: each run of a
// benchmark must have one id.
func checkDistinct(flag string, values []string) error {
	seen := map[string]bool{}
	for _, v := range values {
		if seen[v] {
			return cli.Usagef("%s: %q is given twice", flag, v)
		}
		seen[v] = true
	}
	return nil
}

func newRunID(task string, seed int64) string {
	return fmt.Sprintf("run-%s-s%d-%s", task, seed, randomSuffix())
}

// randomSuffix keeps generated ids unique.
func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// providerKeys are the secrets an MLRB agent needs for its LLM provider.
var providerKeys = map[string]string{"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

// checkAgentFlags validates the agent's flags (secret names for every
// agent, the MLRB image contract's for agent mlrb) and returns the secret
// names the run passes.
func checkAgentFlags(agent, image, provider string, secrets []string) ([]string, error) {
	// Names only, whatever the agent: a value given here would travel
	// through Temporal into the run's history.
	// The bad value is never echoed: it may be the secret itself.
	for i, s := range secrets {
		if err := contract.CheckSecretName(s); err != nil {
			return nil, cli.Usagef("--secret #%d %v", i+1, err)
		}
	}
	if agent != activities.AgentImage {
		if image != "" {
			return nil, cli.Usagef("--image: only agent mlrb runs an image (agent %s is built in)", agent)
		}
		return secrets, nil
	}
	if image == "" {
		return nil, cli.Usagef("--image: agent mlrb needs the agent image (built or loaded on the GPU hosts)")
	}
	key, ok := providerKeys[provider]
	if !ok {
		return nil, cli.Usagef("--provider: %q is not openai or anthropic", provider)
	}
	// As MLRB's run.sh: the provider's key and the Hugging Face token.
	for _, k := range []string{key, "HUGGINGFACE_TOKEN"} {
		if !slices.Contains(secrets, k) {
			secrets = append(secrets, k)
		}
	}
	return secrets, nil
}

func checkRun(cat *tasks.Catalog, pol workflows.Policy, task, agent string, seed int64, limit time.Duration) (*tasks.Spec, error) {
	spec, err := cat.Get(task)
	if err != nil {
		return nil, &cli.UsageError{Err: fmt.Errorf("--task: %w", err)}
	}
	if err := activities.CheckAgent(spec, agent); err != nil {
		hint := ""
		if slices.Contains(activities.KnownAgents(), agent) {
			hint = " (try a mini_* task, see `starter tasks list`)"
		}
		return nil, cli.Usagef("--agent: %v%s", err, hint)
	}
	if seed < 0 {
		return nil, cli.Usagef("--seed: %d is negative; seeds are 0 or more", seed)
	}
	if limit < 0 {
		return nil, cli.Usagef("--time-limit: %s is negative", limit)
	}
	granted := spec.TimeLimit.D()
	if limit > 0 {
		granted = limit
	}
	if err := pol.CheckInterval(granted); err != nil {
		return nil, cli.Usagef("task %s: %v", task, err)
	}
	return spec, nil
}

func runCmd() *cobra.Command {
	var task, agent, id, image string
	var secrets []string
	var seed int64
	var limit time.Duration
	var wait, asJSON bool
	cmd := &cobra.Command{
		Use:   "run --task T --agent reference --seed N",
		Short: "start one run (prints its run id; --wait prints its result)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, cat, err := loadCatalog(cmd)
			if err != nil {
				return err
			}
			if _, err := checkRun(cat, app.Policy(cfg), task, agent, seed, limit); err != nil {
				return err
			}
			if secrets, err = checkAgentFlags(agent, image, cfg.Agent.Provider, secrets); err != nil {
				return err
			}
			if id == "" {
				id = newRunID(task, seed)
			} else if err := checkID(id); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := app.Dial(ctx, cfg, zap.NewNop())
			if err != nil {
				return err
			}
			defer c.Close()
			in := workflows.RunInput{Task: task, Agent: agent, Seed: seed, TimeLimit: limit, Provider: cfg.Agent.Provider, Image: image, Secrets: secrets, Policy: app.Policy(cfg)}
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: id, TaskQueue: cfg.Temporal.TaskQueue,
				Memo: map[string]any{"task": task, "agent": agent, "seed": seed},
			}, workflows.RunWorkflowName, in)
			if err != nil {
				return fmt.Errorf("start run: %w", err)
			}
			if !wait {
				if asJSON {
					return printJSON(map[string]string{"run_id": run.GetID()})
				}
				fmt.Println(run.GetID())
				return nil
			}
			if !asJSON {
				fmt.Fprintln(os.Stderr, "started", run.GetID())
			}
			var res workflows.RunResult
			if err := run.Get(ctx, &res); err != nil {
				return fmt.Errorf("run %s: %w", run.GetID(), err)
			}
			return printResult(&res, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&task, "task", "", "task id (see `starter tasks list`)")
	f.StringVar(&agent, "agent", "reference", "agent: reference, noop, idle, or mlrb (an MLRB agent image)")
	f.StringVar(&image, "image", "", "agent image (agent mlrb)")
	f.StringSliceVar(&secrets, "secret", nil, "name of a worker-side secret to pass to the agent (repeatable; values stay on the worker)")
	f.Int64Var(&seed, "seed", 0, "seed (0 or more)")
	f.DurationVar(&limit, "time-limit", 0, "agent time budget (default: the task's)")
	f.StringVar(&id, "id", "", "run id (default: generated)")
	config.AddFlags(f, append([]string{"agent.provider"}, cli.PolicyKeys...)...)
	f.BoolVar(&wait, "wait", false, "wait for the result")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	_ = cmd.MarkFlagRequired("task")
	return cmd
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printResult(r *workflows.RunResult, asJSON bool) error {
	if asJSON {
		return printJSON(r)
	}
	score := "—"
	if r.Score != nil {
		score = fmt.Sprintf("%.4f", *r.Score)
	}
	fmt.Printf("run        %s\ntask       %s (agent %s, seed %d)\noutcome    %s\nscore      %s\n", r.RunID, r.Task, r.Agent, r.Seed, r.Outcome, score)
	if r.Reason != "" {
		fmt.Printf("reason     %s\n", cli.Printable(r.Reason))
	}
	fmt.Printf("attempts   %d\ncheckpoints %d\nbudget     granted %.0fs, used %.1fs, lost %.1fs (refunded), infra wait %.1fs\nspec       %s\n",
		r.Attempts, r.Checkpoints, r.Budget.GrantedS(), r.Budget.UsedS, r.Budget.LostS, r.Budget.InfraWaitS, r.SpecHash)
	for _, v := range r.Violations {
		fmt.Printf("violation  %s\n", v)
	}
	return nil
}

// withClient makes a command's RunE that loads the config, dials
// Temporal and runs body with the client.
func withClient(body func(ctx context.Context, c client.Client, cfg *config.Config, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cfg, err := cli.LoadConfig(cmd)
		if err != nil {
			return err
		}
		c, err := app.Dial(cmd.Context(), cfg, zap.NewNop())
		if err != nil {
			return err
		}
		defer c.Close()
		return body(cmd.Context(), c, cfg, args)
	}
}
