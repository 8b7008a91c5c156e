// `mlrb-agent researcher`: the LLM research agent's subcommand.

package agentcmd

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	refagent "github.com/mlrb/mlrb/agents/reference"
	"github.com/mlrb/mlrb/agents/researcher"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/tasks"
)

// Variables the research agent reads beside the contract's: a
// definition's env sets them.
const (
	envAPI       = "RESEARCHER_API"            // chat or responses (OpenAI); messages (Anthropic)
	envWindow    = "RESEARCHER_CONTEXT_WINDOW" // tokens, for a model the agent's table lacks
	envNoteEvery = "RESEARCHER_NOTE_EVERY"     // how often the model is told its time and budget (15m)
	envMaxOutput = "RESEARCHER_MAX_OUTPUT"     // each call's output bound in tokens (8192)
)

func researcherCommand() *cobra.Command {
	return agentCommand("researcher", "run mlrb's LLM research agent (the definition's provider and model, through the run's gateway)", runResearcher)
}

func runResearcher(ctx context.Context, spec *tasks.Spec, env contract.Env) error {
	model, api, err := researcher.Open(env.Provider, os.Getenv(envAPI), env.Model)
	if err != nil {
		return err
	}
	if env.Model == "" {
		return fmt.Errorf("%s is not set: the agent's definition names its model", contract.EnvModel)
	}
	a := &researcher.Agent{Env: env, Spec: spec, Model: model, ModelName: env.Model, API: api, Log: os.Stdout, NoteEvery: 15 * time.Minute}
	if a.Window, err = intVar(envWindow); err != nil {
		return err
	}
	if a.MaxOutput, err = intVar(envMaxOutput); err != nil {
		return err
	}
	if s := os.Getenv(envNoteEvery); s != "" {
		if a.NoteEvery, err = time.ParseDuration(s); err != nil || a.NoteEvery < 0 {
			return fmt.Errorf("%s: %q is not a duration (e.g. 15m)", envNoteEvery, s)
		}
	}
	if a.Prices, err = llm.BuiltinPrices(); err != nil {
		return err
	}
	return a.Run(ctx)
}

func intVar(name string) (int64, error) {
	s := os.Getenv(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive number", name, s)
	}
	return n, nil
}

// trainCommand trains one model of a mini task: the mini suite's tool,
// as a real task's image brings python and torch.
func trainCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use: "train [key=value ...]", Hidden: true, SilenceUsage: true,
		Short: "train one model of this run's mini task (MLRB_* env) with the settings given, save it, and print its validation score",
		RunE: func(_ *cobra.Command, args []string) error {
			env, spec, err := readContract()
			if err != nil {
				return err
			}
			cfg := map[string]float64{}
			for _, a := range args {
				k, v, ok := strings.Cut(a, "=")
				f, err := strconv.ParseFloat(v, 64)
				if !ok || err != nil {
					return fmt.Errorf("setting %q: give key=number", a)
				}
				cfg[k] = f
			}
			if len(args) == 0 {
				keys, n, err := refagent.TrialKeys(spec, uint64(env.Seed))
				if err != nil {
					return err
				}
				fmt.Printf("task %s: settings (defaults) %v; the reference grid has %d settings\n", spec.ID, keys, n)
			}
			res, err := refagent.Trial(spec, uint64(env.Seed), cfg, out)
			if err != nil {
				return err
			}
			fmt.Printf("validation=%.6f lower_is_better=%v params=%d saved=%s\n", res.Validation, res.LowerIsBetter, res.Params, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", contract.OutputDir+"/model", "the model directory")
	return cmd
}
