package e2e

import (
	"strings"
	"testing"
)

// TestDockerNonRootUser (audits N6, L2): by default (container.user
// 65532:65532) agents and evaluators run as uid 65532, never root on the
// host's files: the built-in agent works in its mounted workspace, its
// model is evaluated by a non-root evaluator, and an agent image sees the
// uid it was given.
func TestDockerNonRootUser(t *testing.T) {
	parallel(t)
	buildEnvImage(t)
	e := containerAgentEnv(t)
	var res result
	e.starterJSON(&res, "run", "--task", "e2e_container", "--agent", "reference", "--seed", "1", "--wait", "--json")
	if res.Outcome != "scored" || res.Score == nil {
		e.dumpLogs()
		t.Fatalf("as uid 65532: %+v", res)
	}
	var env result
	e.starterJSON(&env, "run", "--task", "e2e_container", "--label", "e2e-image", "--image", "mlrb-envtask:e2e", "--provider", "openai",
		"--seed", "2", "--wait", "--json")
	logs, errs, code := e.starter("logs", env.RunID)
	if code != 0 || !strings.Contains(logs, "running as uid 65532 gid 65532") {
		t.Fatalf("the agent's log (%s):\n%s", errs, logs)
	}
}

// TestDockerWorkspaceLimit: an agent that outgrows agent.workspace_limit_gb
// is killed and its run ends agent_failed with a reason naming the limit.
func TestDockerWorkspaceLimit(t *testing.T) {
	parallel(t)
	testtaskImage(t, "mlrb-bulk64:e2e", "bulk", "64")
	e := containerAgentEnv(t, "MLRB_AGENT_WORKSPACE_LIMIT_GB=0.03")
	var res result
	e.starterJSON(&res, "run", "--task", "e2e_container", "--label", "e2e-image", "--image", "mlrb-bulk64:e2e", "--provider", "openai",
		"--seed", "1", "--time-limit", "90s", "--wait", "--json")
	if res.Outcome != "agent_failed" || !strings.Contains(res.Reason, "agent.workspace_limit_gb") || res.Budget.UsedS > 60 {
		e.dumpLogs()
		t.Fatalf("over the limit: %+v", res)
	}
	t.Logf("%s after %.1f s of agent time", res.Reason, res.Budget.UsedS)
}

// TestWorkspaceEntriesLimit (audit N3): an agent whose workspace holds
// more entries than agent.workspace_max_entries (each a line of every
// manifest: a hard-link bomb made a million) is killed, and its run ends
// agent_failed naming the limit.
func TestWorkspaceEntriesLimit(t *testing.T) {
	parallel(t)
	e := newEnv(t, "MLRB_AGENT_WORKSPACE_MAX_ENTRIES=8")
	e.start("worker", "--dev")
	e.waitServer()
	var res result
	// The idle agent holds its run for its budget: the watch sees it.
	e.starterJSON(&res, "run", "--task", "mini_baby_lm", "--agent", "idle", "--seed", "1", "--time-limit", "60s", "--wait", "--json")
	if res.Outcome != "agent_failed" || !strings.Contains(res.Reason, "agent.workspace_max_entries = 8") {
		e.dumpLogs()
		t.Fatalf("over the entries limit: %+v", res)
	}
}
