// Command agent is mlrb-agent, the binary that runs the built-in agents
// and the reference evaluator: beside the worker (host.runtime process),
// and as the static binary inside the reference agent and
// evaluator image (deploy/reference.Dockerfile): `/mlrb reference-agent`,
// `/mlrb reference-eval …`, `/mlrb noop-agent`, `/mlrb idle-agent`.
package main

import (
	"fmt"
	"os"

	"github.com/mlrb/mlrb/internal/process/agentcmd"
)

func main() {
	if agentcmd.RunIfAgent() {
		return
	}
	fmt.Fprintln(os.Stderr, "usage: mlrb reference-agent | noop-agent | idle-agent | reference-eval --task T --seed N --model DIR --output_path DIR")
	os.Exit(2)
}
