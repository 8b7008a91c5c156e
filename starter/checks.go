package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/agents"
	"github.com/mlrb/mlrb/internal/cli"
	"github.com/mlrb/mlrb/internal/contract"
	"github.com/mlrb/mlrb/tasks"
	"github.com/mlrb/mlrb/workflows"
)

// Checks of what commands are given, each naming the flag and the fix.

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$`)

// checkID refuses an id the runs' keys cannot hold: a run id names its
// store prefix and a benchmark's children are <id>/<agent>/<task>/s<seed>.
func checkID(id string) error {
	if !idPattern.MatchString(id) || strings.Contains(id, "..") {
		return cli.Usagef("--id: %q may hold letters, digits, '.', '_' and '-' only (no '/', no '..')", id)
	}
	return nil
}

// checkDistinct refuses a list that names something twice: each run of a
// benchmark must have one id.
func checkDistinct(flag string, values []string) error {
	seen := map[string]bool{}
	for _, v := range values {
		if seen[v] {
			return cli.Usagef("%s: %q is given twice", flag, v)
		}
		seen[v] = true
	}
	return nil
}

func newRunID(task string, seed int64) string {
	return fmt.Sprintf("run-%s-s%d-%s", task, seed, randomSuffix())
}

// randomSuffix keeps generated ids unique.
func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// checkAgentFlags validates the agent's flags (secret names for every
// agent, the MLRB image contract's for agent mlrb) and returns the secret
// names the run passes.
func checkAgentFlags(agent, image, provider string, secrets []string) ([]string, error) {
	// Names only, whatever the agent: a value given here would travel
	// through Temporal into the run's history.
	// The bad value is never echoed: it may be the secret itself.
	for i, s := range secrets {
		if err := contract.CheckSecretName(s); err != nil {
			return nil, cli.Usagef("--secret #%d %v", i+1, err)
		}
	}
	if agent != agents.ImageAgent {
		if image != "" {
			return nil, cli.Usagef("--image: only agent mlrb runs an image (agent %s is built in)", agent)
		}
		return secrets, nil
	}
	if image == "" {
		return nil, cli.Usagef("--image: agent mlrb needs the agent image (built or loaded on the GPU hosts)")
	}
	if provider != "openai" && provider != "anthropic" {
		return nil, cli.Usagef("--provider: %q is not openai or anthropic", provider)
	}
	// As MLRB's run.sh, the Hugging Face token; the provider's key never
	// reaches the agent: the gateway gives it a token for its calls.
	if !slices.Contains(secrets, "HUGGINGFACE_TOKEN") {
		secrets = append(secrets, "HUGGINGFACE_TOKEN")
	}
	return secrets, nil
}

func checkRun(cat *tasks.Catalog, pol workflows.Policy, task, agent string, seed int64, limit time.Duration) (*tasks.Spec, error) {
	spec, err := cat.Get(task)
	if err != nil {
		return nil, &cli.UsageError{Err: fmt.Errorf("--task: %w", err)}
	}
	if err := agents.Check(spec, agent); err != nil {
		hint := ""
		if slices.Contains(agents.Known(), agent) {
			hint = " (try a mini_* task, see `starter tasks list`)"
		}
		return nil, cli.Usagef("--agent: %v%s", err, hint)
	}
	if seed < 0 {
		return nil, cli.Usagef("--seed: %d is negative; seeds are 0 or more", seed)
	}
	if limit < 0 {
		return nil, cli.Usagef("--time-limit: %s is negative", limit)
	}
	granted := spec.TimeLimit.D()
	if limit > 0 {
		granted = limit
	}
	if err := pol.CheckInterval(granted); err != nil {
		return nil, cli.Usagef("task %s: %v", task, err)
	}
	return spec, nil
}
