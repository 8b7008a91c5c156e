// Checks of the ids and names a command is given.

package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/run/contract"
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

// checkSecrets refuses secret names that are not names, or that the
// starter's agent.secret_names (when set) does not allow; the worker
// checks them again against its own.
func checkSecrets(flag string, names, allowed []string, providerKeys ...string) error {
	// The bad value is never echoed: it may be the secret itself.
	for i, s := range names {
		if err := contract.CheckSecretName(s); err != nil {
			return cli.Usagef("%s #%d %v", flag, i+1, err)
		}
		for _, k := range providerKeys {
			if strings.EqualFold(s, k) {
				return cli.Usagef("%s #%d names %s, a provider key (gateway.openai_key, gateway.anthropic_key): it stays on the worker; the gateway gives the agent a token", flag, i+1, s)
			}
		}
		if len(allowed) > 0 && !slices.Contains(allowed, s) {
			return cli.Usagef("%s #%d: %s is not in agent.secret_names (%s): add it there, or drop it", flag, i+1, s, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// checkRun checks a run of def on task (the agent given by agentFlag): a
// known task the agent can do, a seed, a time limit and a checkpoint
// interval that fits it.
func checkRun(agentFlag string, cat *tasks.Catalog, pol workflows.Policy, task string, def agents.Definition, seed int64, limit time.Duration) (*tasks.Spec, error) {
	spec, err := cat.Get(task)
	if err != nil {
		return nil, &cli.UsageError{Err: fmt.Errorf("--task: %w", err)}
	}
	if err := def.CheckTask(spec.ID, spec.Suite == "mini"); err != nil {
		return nil, cli.Usagef("%s: %v", agentFlag, err)
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

// curveWarnings name the tasks whose checkpoints are further apart than
// their curve's marks: such a mark is scored on a later checkpoint (up
// to one interval late) or has none.
func curveWarnings(cat *tasks.Catalog, pol workflows.Policy, ids []string, limit time.Duration) []string {
	var out []string
	for _, id := range ids {
		found, err := cat.Get(id)
		if err != nil || pol.NoCurve {
			continue
		}
		spec := *found
		budget := spec.TimeLimit.D()
		if limit > 0 {
			budget = limit
		}
		if len(pol.Curve) > 0 {
			spec.Evaluation.Curve = &tasks.Curve{At: pol.Curve}
		}
		every, spacing := spec.Interval(pol.CheckpointInterval, budget/workflows.MaxCheckpointsPerRun), spec.CurveSpacing(budget)
		if spacing > 0 && every > spacing {
			out = append(out, fmt.Sprintf("warning: task %s checkpoints every %s, longer than the %s between its curve's marks: a mark is scored on a checkpoint up to %s after it, or has none (lower checkpoint.interval, or the task's checkpoint_interval)",
				id, every, spacing.Round(time.Second/10), every))
		}
	}
	return out
}
