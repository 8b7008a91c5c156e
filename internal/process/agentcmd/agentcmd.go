// The built-in agents' and the reference evaluator's subcommands, and the spec they read.

// Package agentcmd holds the hidden subcommands through which the worker
// binary runs the reference agent, the no-op and idle agents and the reference
// evaluator as separate processes under the agent contract.
package agentcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	refagent "github.com/mlrb/mlrb/agents/reference"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/gateway/door"
	"github.com/mlrb/mlrb/internal/scoring/lmeval"
	"github.com/mlrb/mlrb/internal/scoring/reference"
	"github.com/mlrb/mlrb/tasks"
)

// loadSpec reads the spec the worker wrote for this process, else the
// embedded catalog's.
func loadSpec(id string) (*tasks.Spec, error) {
	if p := os.Getenv(contract.EnvTaskSpec); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", contract.EnvTaskSpec, err)
		}
		var s tasks.Spec
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("%s %s: %w", contract.EnvTaskSpec, p, err)
		}
		return &s, nil
	}
	c, err := tasks.Load("")
	if err != nil {
		return nil, err
	}
	return c.Get(id)
}

// contract reads the agent contract env and the task spec it names.
func readContract() (contract.Env, *tasks.Spec, error) {
	env, err := contract.FromEnv(os.Getenv)
	if err != nil {
		return env, nil, err
	}
	spec, err := loadSpec(env.Task)
	return env, spec, err
}

// agentCommand is a hidden subcommand that runs an agent under the agent
// contract; its context ends at SIGTERM, which means the soft deadline.
func agentCommand(use, short string, run func(ctx context.Context, spec *tasks.Spec, env contract.Env) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Hidden: true, SilenceUsage: true, Short: short,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, spec, err := readContract()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return run(ctx, spec, env)
		},
	}
}

// Commands returns the hidden subcommands.
func Commands() []*cobra.Command {
	agent := agentCommand("reference-agent", "run the reference agent under the agent contract (MLRB_* env)",
		func(ctx context.Context, spec *tasks.Spec, env contract.Env) error {
			// At the soft deadline it stops searching and keeps the best.
			a := &refagent.Agent{Spec: spec, Env: env, Log: os.Stdout}
			return a.Run(ctx)
		})
	noop := agentCommand("noop-agent", "submit an untrained model at once (to measure orchestration overhead)",
		func(_ context.Context, spec *tasks.Spec, env contract.Env) error { return refagent.Noop(spec, env) })
	idle := agentCommand("idle-agent", "submit an untrained model at once, then wait for the soft deadline (SIGTERM)", refagent.Idle)
	var task, model, output, resultsFile, devResultsFile, split string
	var seed uint64
	var name bool
	eval := &cobra.Command{
		Use: reference.EvalCommand, Hidden: true, SilenceUsage: true,
		Short: "score a mini-task model and write lm-eval style results",
		RunE: func(*cobra.Command, []string) error {
			if name {
				fmt.Println(reference.Evaluator())
				return nil
			}
			spec, err := loadSpec(task)
			if err != nil {
				return err
			}
			return evaluate(spec, seed, model, split, output, resultsFile, devResultsFile)
		},
	}
	eval.Flags().BoolVar(&name, "name", false, "print this evaluator's name (its scoring code's hash) and exit: the worker records it")
	eval.Flags().StringVar(&task, "task", "", "task id")
	eval.Flags().Uint64Var(&seed, "seed", 0, "seed of the run")
	eval.Flags().StringVar(&model, "model", "", "model directory")
	eval.Flags().StringVar(&output, "output_path", "", "results directory (a results_<date>.json in it)")
	eval.Flags().StringVar(&split, "split", contract.SplitTest, "held-out split: test (final models) or dev (a run's curve)")
	eval.Flags().StringVar(&resultsFile, "results_file", "", "the results file to write (the name the worker reads)")
	eval.Flags().StringVar(&devResultsFile, "dev_results_file", "", "also score the dev split and write its results here (evaluation.curve.dev_args)")
	var listen, socket, ready string
	door := &cobra.Command{
		Use: "door", Hidden: true, SilenceUsage: true,
		Short: "an agent's network door: carry each connection on --listen to the worker's --socket",
		RunE: func(*cobra.Command, []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return door.Relay(ctx, listen, socket, ready)
		},
	}
	door.Flags().StringVar(&listen, "listen", "127.0.0.1:3128", "address to accept on (in the agent's network)")
	door.Flags().StringVar(&socket, "socket", "/door/door.sock", "the worker's gateway socket")
	door.Flags().StringVar(&ready, "ready", "/door/ready", "file written once the door accepts")
	return []*cobra.Command{agent, noop, idle, researcherCommand(), trainCommand(), eval, door, holdCommand()}
}

// evaluate scores the model on split and writes its results (to
// resultsFile, else a results_<date>.json under output); with
// devResultsFile, it scores the dev split too (the curve's dev_args), at
// the same time on another core, since a run waits for both.
func evaluate(spec *tasks.Spec, seed uint64, model, split, output, resultsFile, devResultsFile string) error {
	var dev *lmeval.Results
	devErr := make(chan error, 1)
	if devResultsFile != "" {
		go func() {
			var err error
			dev, err = reference.Evaluate(spec, seed, model, contract.SplitDev)
			if err != nil {
				err = fmt.Errorf("the dev split: %w", err)
			}
			devErr <- err
		}()
	} else {
		devErr <- nil
	}
	res, err := reference.Evaluate(spec, seed, model, split)
	if derr := <-devErr; err == nil {
		err = derr
	}
	if err != nil {
		return err
	}
	out := resultsFile
	if out == "" {
		out, err = lmeval.Write(output, res, time.Now())
	} else {
		err = lmeval.WriteFile(out, res, time.Now())
	}
	if err != nil {
		return err
	}
	fmt.Println("results:", filepath.Clean(out))
	if devResultsFile == "" {
		return nil
	}
	if err := lmeval.WriteFile(devResultsFile, dev, time.Now()); err != nil {
		return err
	}
	fmt.Println("dev results:", filepath.Clean(devResultsFile))
	return nil
}

// RunIfAgent runs a hidden subcommand when the process was started as one
// (a binary without a cobra root of its own, such as a bench command, is
// still the `{self}` that runs agents); it returns false otherwise.
func RunIfAgent() bool {
	if filepath.Base(os.Args[0]) == "task" { // a person's `task`, linked to the binary
		os.Exit(Task(os.Args[1:], os.Stdout, os.Stderr))
	}
	if len(os.Args) < 2 {
		return false
	}
	for _, c := range Commands() {
		if c.Name() == os.Args[1] {
			c.SetArgs(os.Args[2:])
			if err := c.Execute(); err != nil {
				os.Exit(1)
			}
			return true
		}
	}
	return false
}
