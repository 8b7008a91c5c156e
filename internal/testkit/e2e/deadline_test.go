package e2e

import (
	"path/filepath"
	"testing"
)

// TestDeadline: an agent that would search far longer than its budget gets
// SIGTERM at the deadline minus grace, keeps its best model, and the run
// ends limit_reached with a score. The agent and the evaluator run from
// the worker's own binary, as they do where no mlrb-agent is beside it
// (`go run`).
func TestDeadline(t *testing.T) {
	parallel(t)
	e := newEnv(t, "MLRB_CHECKPOINT_INTERVAL=2s", "MLRB_AGENT_HEARTBEAT_TIMEOUT=5s", "MLRB_AGENT_GRACE=2s",
		"MLRB_HOST_AGENT_BINARY="+filepath.Join(bin, "worker"))
	e.addTask("e2e_long", "mini_baby_lm", map[string]string{"trials: 24": "trials: 60", "trial_seconds: 0.4": "trial_seconds: 1"})
	e.start("worker", "--dev")
	e.waitServer()
	id := e.startRun("--task", "e2e_long", "--agent", "reference", "--seed", "2", "--time-limit", "8s")
	// Its agent searches until SIGTERM, 6 s after it starts.
	if exe, want := e.agentExe(), realPath(t, filepath.Join(bin, "worker")); exe != want {
		t.Fatalf("the agent runs %s, not host.agent_binary %s", exe, want)
	}
	var res result
	e.starterJSON(&res, "result", id, "--wait", "--json")
	if res.Outcome != "limit_reached" || res.Score == nil || res.Attempts != 1 {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
	if res.Budget.UsedS > res.Budget.GrantedS+1 || res.Budget.GrantedS != 8 {
		t.Fatalf("budget = %+v", res.Budget)
	}
	var st status
	e.starterJSON(&st, "status", res.RunID, "--json")
	if st.Phase != "done" || st.BudgetLeftS > 3 { // it stops at SIGTERM, grace (2 s) before the end
		t.Fatalf("status after the run = %+v", st)
	}
	t.Logf("score %.4f, budget %+v", *res.Score, res.Budget)
}
