// Package agents is the registry of the agents a worker can start: the
// built-in ones (subcommands of the mlrb binary) and ImageAgent, which
// runs an MLRB agent image with its own command.
package agents

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/tasks"
)

// ImageAgent is the agent that runs an MLRB agent image with its own
// command, as MLRB's run.sh does.
const ImageAgent = "mlrb"

// commands are how a worker starts each agent: the built-in ones run a
// subcommand of the mlrb binary ({self}); ImageAgent runs its image's own.
var commands = map[string][]string{
	"reference": {"{self}", "reference-agent"},
	"noop":      {"{self}", "noop-agent"},
	"idle":      {"{self}", "idle-agent"},
	ImageAgent:  nil,
}

// Command is the command line agent runs with (nil: its image's own).
func Command(agent string) []string { return commands[agent] }

// Known lists the agent names, sorted.
func Known() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Check tells whether agent can run task: a known agent, and a built-in
// one only on a mini task (the full tasks need an agent image).
func Check(spec *tasks.Spec, agent string) error {
	if _, ok := commands[agent]; !ok {
		return fmt.Errorf("unknown agent %q (known: %s)", agent, strings.Join(Known(), ", "))
	}
	if agent != ImageAgent && spec.Reference == nil {
		return fmt.Errorf("agent %s only does the mini suite; task %s needs a real agent image", agent, spec.ID)
	}
	return nil
}
