// Command starter is mlrb's CLI: start runs and the demo benchmark, watch
// and query them, read results, browse the task catalog and the config.
package main

import (
	"github.com/spf13/cobra"

	"github.com/mlrb/mlrb/internal/agentcmd"
	"github.com/mlrb/mlrb/internal/cli"
)

func main() {
	root := &cobra.Command{
		Use:   "starter",
		Short: "start and inspect ML Research Benchmark runs on Temporal",
	}
	pf := root.PersistentFlags()
	pf.String("config", "", "config file (default $MLRB_CONFIG, else ./mlrb.yaml)")
	pf.String("address", "", "Temporal frontend host:port (config temporal.address)")
	pf.String("namespace", "", "Temporal namespace (config temporal.namespace)")
	pf.String("tasks-dir", "", "extra task catalog directory (config tasks.dir)")
	pf.String("state-dir", "", "state directory: the store checkpoints, logs and results are read from, and demo's embedded server (config dev.state_dir)")
	root.AddCommand(runCmd(), statusCmd(), listCmd(), resultCmd(), demoCmd(), tasksCmd(), configCmd(), checkpointCmd(), storageCmd(), logsCmd(), retryEvalCmd(), benchmarkCmd(), resultsCmd(), forkCmd(), cancelCmd(), extendCmd(), watchCmd(), hostsCmd(), replayCmd())
	root.AddCommand(agentcmd.Commands()...)
	cli.Execute(root)
}
