package e2e

import (
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// TestHostLostForGood: three hosts (two slots each) on one Temporal
// server of its own; six runs spread over them. The busiest host is
// killed (SIGKILL, agents with it) and never comes back: its runs resume
// on the other two from their last checkpoints, each losing at most the
// checkpoint interval and the heartbeat timeout, and all six are scored.
func TestHostLostForGood(t *testing.T) {
	parallel(t)
	e := crashEnv(t, hbTimeout)
	e.vars = append(e.vars, "MLRB_HOST_MAX_AGENTS=2", "MLRB_HOST_LEASE_TTL=10s")
	e.startAs("server", nil, "worker", "--dev", "--server-only")
	e.waitServer()
	workers := map[string]*proc{}
	for _, h := range []string{"a", "b", "c"} {
		workers[h] = e.startAs("worker-"+h, []string{"MLRB_HOST_ID=" + h, "MLRB_HOST_WORK_DIR=" + filepath.Join(e.state, "work-"+h)}, "worker")
	}
	var runs []string
	for seed := 1; seed <= 6; seed++ {
		runs = append(runs, e.startRun("--task", "e2e_crash", "--agent", "reference", "--seed", strconv.Itoa(seed), "--time-limit", "40s"))
	}
	for _, r := range runs {
		e.waitCheckpoints(r, 1)
	}
	victim, held := "", 0
	for _, h := range e.hosts() {
		if len(h.Leases) > held {
			victim, held = h.ID, len(h.Leases)
		}
	}
	if held == 0 {
		t.Fatal("no host holds a run")
	}
	workers[victim].kill(t)
	t.Logf("killed host %s with %d runs", victim, held)

	results := make([]result, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.starterJSON(&results[i], "result", r, "--wait", "--json")
		}()
	}
	wg.Wait()
	moved := 0
	maxLost := (interval + hbTimeout).Seconds()
	for _, res := range results {
		if res.Outcome != "scored" || res.Budget.LostS > maxLost {
			e.dumpLogs()
			t.Fatalf("run %s: %+v (lost %.1f s, at most %.0f)", res.RunID, res, res.Budget.LostS, maxLost)
		}
		if res.Attempts > 1 {
			moved++
		}
	}
	if moved < held {
		t.Fatalf("%d runs resumed elsewhere; the killed host held %d", moved, held)
	}
	for _, h := range e.hosts() {
		if h.ID != victim && h.InUse != 0 {
			t.Fatalf("host %s still holds %v after every run ended", h.ID, h.Leases)
		}
		if h.ID == victim && h.State != "up" && h.State != "silent" {
			t.Fatalf("the killed host shows as %q", h.State)
		}
	}
}
