// Command starter is mlrb's CLI: start runs and the demo benchmark, watch
// and query them, read results, browse the task catalog and the config.
package main

import (
	"github.com/spf13/cobra"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/agentcmd"
	"github.com/mlrb/mlrb/internal/process/cli"
)

func main() { cli.Execute(newRoot()) }

// newRoot is the starter's command tree.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "starter",
		Short: "start and inspect ML Research Benchmark runs on Temporal",
	}
	pf := root.PersistentFlags()
	pf.String("config", "", "config file (default $MLRB_CONFIG, else ./mlrb.yaml)")
	config.AddFlags(pf, "temporal.address", "temporal.namespace", "tasks.dir", "agents.dir", "dev.state_dir")
	root.AddCommand(setupCmd(), runCmd(), agentsCmd(), anchorsCmd(), statusCmd(), listCmd(), resultCmd(), demoCmd(), tasksCmd(), configCmd(), checkpointCmd(), storageCmd(), logsCmd(), callsCmd(), experimentsCmd(), retryEvalCmd(), benchmarkCmd(), resultsCmd(), planCmd(), exportCmd(), reportCmd(), forkCmd(), replayCallsCmd(), certifyCmd(), cancelCmd(), extendCmd(), watchCmd(), hostsCmd(), replayCmd(), keysCmd(), inviteCmd(), attachCmd(), sessionsCmd(), bundleCmd(), verifyCmd(), rescoreCmd(), reviewCmd())
	root.AddCommand(agentcmd.Commands()...)
	return root
}
