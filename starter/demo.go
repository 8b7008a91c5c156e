// `starter demo`: its flags and what it does.

package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/process/show"
	"github.com/mlrb/mlrb/workflows"
)

// demoOptions are `starter demo`'s flags.
type demoOptions struct {
	seeds, concurrency int
	exit               bool
	agent              string
}

func (o *demoOptions) AddFlags(f *pflag.FlagSet) {
	f.IntVar(&o.seeds, "seeds", 3, "seeds per task")
	f.IntVar(&o.concurrency, "concurrency", workflows.DefaultConcurrency, "runs at once")
	f.StringVar(&o.agent, "agent", "reference", "agent: reference, noop or idle")
	f.BoolVar(&o.exit, "exit", false, "stop when the benchmark is done")
	config.AddFlags(f, append([]string{"dev.port", "dev.ui_port"}, cli.PolicyKeys...)...)
}

func demoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "start an embedded Temporal server, Web UI and worker, and run the 7 mini tasks × 3 seeds",
		Args:  cobra.NoArgs,
		RunE:  run(func(g *globals, _ []string) error { return runDemo(g, o) }),
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// input checks the options and makes the demo benchmark's input.
func (o demoOptions) input(g *globals) (workflows.BenchmarkInput, error) {
	var in workflows.BenchmarkInput
	if o.seeds < 1 || o.concurrency < 1 {
		return in, cli.Usagef("--seeds and --concurrency must be at least 1")
	}
	cfg, cat, err := g.catalog()
	if err != nil {
		return in, err
	}
	defs, err := agentsOf(g, "--agent", []string{o.agent})
	if err != nil {
		return in, err
	}
	if defs[0].Builtin == "" {
		return in, cli.Usagef("--agent: the demo runs a built-in agent (reference, noop or idle) on its embedded worker, not an agent image")
	}
	ids := cat.IDs("mini")
	for _, t := range ids {
		if _, err := checkRun("--agent", cat, app.Policy(cfg), t, defs[0], 0, 0); err != nil {
			return in, err
		}
	}
	return workflows.NewBenchmarkInput(ids, defs, o.seeds, o.concurrency, workflows.RunInput{LLMProvider: cfg.Agent.Provider, Policy: app.Policy(cfg)}), nil
}

// runDemo starts an embedded server, Web UI and worker, runs the mini
// benchmark with a progress line every 2 s, prints its leaderboard and
// keeps the Web UI up until Ctrl-C (or stops, with --exit).
func runDemo(g *globals, o demoOptions) error {
	in, err := o.input(g)
	if err != nil {
		return err
	}
	logger, err := app.NewLogger("warn")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(g.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	g.ctx = ctx
	cfg := g.cfg
	st, err := app.StartStack(ctx, cfg, logger, true, false)
	if err != nil {
		return err
	}
	defer st.Stop()
	srv := st.Server
	g.c = st.Client
	defer func() { g.c = nil }() // the stack closes its own client
	fmt.Fprintf(g.out, "Temporal %s   Web UI %s   state %s\n", srv.Address(), srv.UIAddress(), cfg.Dev.StateDir)
	benchID := "demo-" + time.Now().UTC().Format("20060102-150405")
	run, err := st.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: benchID, TaskQueue: cfg.Temporal.TaskQueue}, workflows.BenchmarkWorkflowName, in)
	if err != nil {
		return fmt.Errorf("start demo benchmark: %w", err)
	}
	fmt.Fprintf(g.out, "benchmark %s: %d tasks × %d seeds, agent %s, %d at a time\n", benchID, len(in.Tasks), o.seeds, o.agent, o.concurrency)
	fmt.Fprintf(g.out, "watch it: %s/namespaces/%s/workflows/%s\n", srv.UIAddress(), cfg.Temporal.Namespace, benchID)
	res, err := followBenchmark(g, run)
	if err != nil {
		return err
	}
	fmt.Fprintln(g.out)
	if err := printBenchmark(g, res.BenchmarkID, "table"); err != nil {
		return err
	}
	if o.exit {
		return nil
	}
	fmt.Fprintf(g.out, "\nWeb UI stays up at %s — Ctrl-C to stop.\n", srv.UIAddress())
	<-ctx.Done()
	return nil
}

// followBenchmark prints the benchmark's progress line every 2 s until it
// ends, and returns its result.
func followBenchmark(g *globals, run client.WorkflowRun) (*workflows.BenchmarkResult, error) {
	done := make(chan error, 1)
	var res workflows.BenchmarkResult
	go func() { done <- run.Get(g.ctx, &res) }()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, fmt.Errorf("demo benchmark: %w", err)
			}
			return &res, nil
		case <-tick.C:
			// A query can fail between workflow tasks: the next tick shows it.
			if s, err := snapshotBenchmark(g.ctx, g.c, run.GetID(), false); err == nil {
				show.ProgressLine(g.out, s.prog)
			}
		case <-g.ctx.Done():
			return nil, g.ctx.Err()
		}
	}
}
