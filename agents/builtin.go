// Built-in agents run a subcommand of the mlrb binary ({self}) as processes or in the reference image.

package agents

import (
	"fmt"
	"slices"
)

// Built-in agents run a subcommand of the mlrb binary ({self}) as
// processes or in the reference image; every other agent is an image
// that runs its own command. None calls an LLM: a model's commands are
// never run as a process beside the worker (host.runtime process runs
// with the worker's uid), so mlrb's LLM agent is an image agent
// (`args: [/mlrb, researcher]` in deploy/researcher*.Dockerfile's images).
var builtins = map[string][]string{
	"reference": {"{self}", "reference-agent"},
	"noop":      {"{self}", "noop-agent"},
	"idle":      {"{self}", "idle-agent"},
}

// Builtins lists the built-in agents, sorted.
func Builtins() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// LegacyImage is the agent name runs started before agent definitions
// gave an image agent: MLRB's image, with its image in the run's input.
const LegacyImage = "mlrb"

// Of is the agent a run names: its definition, else (a run started
// before definitions, or replayed from then, naming only an agent and an
// image) the one it implies.
func Of(def *Definition, name, image, provider string) Definition {
	switch {
	case def != nil:
		return *def
	case name == LegacyImage || image != "":
		return Definition{Name: name, Image: image, Provider: provider}
	}
	return Definition{Name: name, Builtin: name}
}

// Command is the command line the definition runs with (nil: its
// image's own, or its args in place of the image's command).
func (d Definition) Command() []string {
	if d.Builtin != "" {
		return builtins[d.Builtin]
	}
	if len(d.Args) > 0 {
		return slices.Clone(d.Args)
	}
	return nil
}

// CheckTask tells whether the agent can run a task: a built-in agent
// only does the mini suite (the full tasks need a real agent image).
func (d Definition) CheckTask(taskID string, mini bool) error {
	if d.Builtin != "" && !mini {
		return fmt.Errorf("agent %s is built in (%s) and only does the mini suite; task %s needs an agent image (`starter agents list`)", d.Name, d.Builtin, taskID)
	}
	if d.Builtin == "" && d.Image == "" {
		return fmt.Errorf("agent %s names neither an image nor a built-in agent", d.Name)
	}
	return nil
}
