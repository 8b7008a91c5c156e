package main

import (
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/app"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/workflows"
)

func demoCmd() *cobra.Command {
	var seeds, concurrency int
	var exit bool
	var agent string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "start an embedded Temporal server, Web UI and worker, and run the 7 mini tasks × 3 seeds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seeds < 1 || concurrency < 1 {
				return cli.Usagef("--seeds and --concurrency must be at least 1")
			}
			cfg, cat, err := loadCatalog(cmd)
			if err != nil {
				return err
			}
			if agent == activities.AgentImage {
				return cli.Usagef("--agent: the demo runs a built-in agent (reference, noop or idle), not an agent image")
			}
			for _, t := range cat.IDs("mini") {
				if _, err := checkRun(cat, app.Policy(cfg), t, agent, 0, 0); err != nil {
					return err
				}
			}
			logger, err := app.NewLogger("warn")
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			st, err := app.StartStack(ctx, cfg, logger, true, false)
			if err != nil {
				return err
			}
			defer st.Stop()
			srv, c := st.Server, st.Client
			fmt.Printf("Temporal %s   Web UI %s   state %s\n", srv.Address(), srv.UIAddress(), cfg.Dev.StateDir)

			ids := cat.IDs("mini")
			benchID := "demo-" + time.Now().UTC().Format("20060102-150405")
			in := workflows.NewBenchmarkInput(ids, []string{agent}, seeds, concurrency, workflows.RunInput{Provider: cfg.Agent.Provider, Policy: app.Policy(cfg)})
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: benchID, TaskQueue: cfg.Temporal.TaskQueue}, workflows.BenchmarkWorkflowName, in)
			if err != nil {
				return fmt.Errorf("start demo benchmark: %w", err)
			}
			fmt.Printf("benchmark %s: %d tasks × %d seeds, agent %s, %d at a time\n", benchID, len(ids), seeds, agent, concurrency)
			fmt.Printf("watch it: %s/namespaces/%s/workflows/%s\n", srv.UIAddress(), cfg.Temporal.Namespace, benchID)
			done := make(chan error, 1)
			var res workflows.BenchmarkResult
			go func() { done <- run.Get(ctx, &res) }()
			tick := time.NewTicker(2 * time.Second)
			defer tick.Stop()
			for waiting := true; waiting; {
				select {
				case err := <-done:
					if err != nil {
						return fmt.Errorf("demo benchmark: %w", err)
					}
					waiting = false
				case <-tick.C:
					printProgress(cmd, c, benchID)
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			fmt.Println()
			if err := printBenchmark(ctx, c, cfg, &res, "table"); err != nil {
				return err
			}
			if exit {
				return nil
			}
			fmt.Printf("\nWeb UI stays up at %s — Ctrl-C to stop.\n", srv.UIAddress())
			<-ctx.Done()
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&seeds, "seeds", 3, "seeds per task")
	f.IntVar(&concurrency, "concurrency", workflows.DefaultConcurrency, "runs at once")
	f.StringVar(&agent, "agent", "reference", "agent: reference, noop or idle")
	f.BoolVar(&exit, "exit", false, "stop when the benchmark is done")
	config.AddFlags(f, append([]string{"dev.port", "dev.ui_port"}, cli.PolicyKeys...)...)
	// Mini tasks last seconds: checkpoint often enough to see it.
	cli.SetDefault(cmd, "checkpoint.interval", "3s")
	return cmd
}

func printProgress(cmd *cobra.Command, c client.Client, benchID string) {
	val, err := c.QueryWorkflow(cmd.Context(), benchID, "", workflows.QueryProgress)
	if err != nil {
		return
	}
	var p workflows.Progress
	if val.Get(&p) != nil {
		return
	}
	states := map[workflows.ChildState]int{}
	for _, per := range p.PerTask {
		for s, n := range per {
			states[s] += n
		}
	}
	var parts []string
	for s, n := range states {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	sort.Strings(parts)
	bar := strings.Repeat("█", p.Done) + strings.Repeat("░", p.Total-p.Done)
	fmt.Printf("[%s] %d/%d  %s\n", bar, p.Done, p.Total, strings.Join(parts, ", "))
}
