// Command worker hosts mlrb's workflows and activities. With --dev it
// first starts an embedded Temporal server (SQLite under the state dir)
// and its Web UI, so nothing needs to be installed.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/fleet/preempt"
	"github.com/mlrb/mlrb/internal/process/agentcmd"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
)

// preemptPoll paces the metadata reads: a spot notice comes two minutes
// ahead, a hand-back takes seconds.
const preemptPoll = 2 * time.Second

func main() { cli.Execute(newRoot()) }

// newRoot is the worker's command.
func newRoot() *cobra.Command {
	var dev, serverOnly bool
	root := &cobra.Command{
		Use:   "worker",
		Short: "run mlrb's workflows and activities (--dev: with an embedded Temporal server and Web UI)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cli.LoadConfig(cmd)
			if err != nil {
				return err
			}
			if serverOnly && !dev {
				return cli.Usagef("--server-only needs --dev")
			}
			logger, err := app.NewLogger(cfg.Log.Level)
			if err != nil {
				return err
			}
			defer func() { _ = logger.Sync() }()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			st, err := app.StartStack(ctx, cfg, logger, dev, serverOnly)
			if err != nil {
				return err
			}
			defer st.Stop()
			if st.Server != nil {
				logger.Info("embedded Temporal server ready", zap.String("address", st.Server.Address()), zap.String("web_ui", st.Server.UIAddress()), zap.String("state_dir", cfg.Dev.StateDir))
				fmt.Printf("Temporal %s  Web UI %s  state %s\n", st.Server.Address(), st.Server.UIAddress(), cfg.Dev.StateDir)
			}
			if st.Worker != nil {
				logger.Info("worker polling", zap.String("task_queue", cfg.Temporal.TaskQueue), zap.String("host_queue", st.Worker.HostQueue))
				if cfg.Host.Preemption == config.PreemptionEC2Spot {
					// A notice stops the worker as SIGTERM does: every
					// attempt is checkpointed and handed back to its run.
					go preempt.WatchEC2(ctx, cfg.Host.IMDSEndpoint, preemptPoll, logger.Named("preempt"), func(string) { stop() })
				}
			}
			<-ctx.Done()
			logger.Info("stopping")
			return nil
		},
	}
	f := root.Flags()
	f.String("config", "", "config file (default $MLRB_CONFIG, else ./mlrb.yaml)")
	f.BoolVar(&dev, "dev", false, "embed a Temporal server with its Web UI (state under --state-dir)")
	f.BoolVar(&serverOnly, "server-only", false, "with --dev: run only the embedded server, no worker")
	config.AddFlags(f, cli.WorkerKeys...)
	root.AddCommand(agentcmd.Commands()...)
	return root
}
