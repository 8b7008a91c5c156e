package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// TestPartitionedWorkerFencesItself: two hosts on one Temporal server
// (its own process). Host a runs the agent; then the network between
// host a and the server is cut, while host a still reaches the store and
// its agent keeps running. Host a stops its agent within the heartbeat
// timeout and commits nothing more; host b resumes the run from its last
// checkpoint and finishes it. Nothing host a wrote after host b took over
// is the run's, and when the network heals host a does no harm.
func TestPartitionedWorkerFencesItself(t *testing.T) {
	parallel(t)
	e := crashEnv(t, hbTimeout)
	e.startAs("server", nil, "worker", "--dev", "--server-only")
	e.waitServer()
	link := newProxy(t, "127.0.0.1:"+strconv.Itoa(e.port))
	workA, workB := filepath.Join(e.state, "work-a"), filepath.Join(e.state, "work-b")
	e.startAs("worker-a", []string{"MLRB_HOST_ID=a", "MLRB_HOST_WORK_DIR=" + workA, "MLRB_TEMPORAL_ADDRESS=" + link.addr()}, "worker")
	runID := e.startRun("--task", "e2e_crash", "--agent", "reference", "--seed", "3", "--time-limit", "25s")
	e.waitCheckpoints(runID, 2)
	pids := agentPIDsUnder(workA)
	if len(pids) != 1 {
		t.Fatalf("host a runs agents %v", pids)
	}
	e.startAs("worker-b", []string{"MLRB_HOST_ID=b", "MLRB_HOST_WORK_DIR=" + workB}, "worker")

	link.partition()
	cut := time.Now()
	for alive(pids[0]) && time.Since(cut) < hbTimeout+5*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(pids[0]) {
		e.dumpLogs()
		t.Fatalf("host a's agent still runs %s after host a lost the server", time.Since(cut).Round(time.Second))
	}
	t.Logf("host a stopped its agent %s after the cut", time.Since(cut).Round(100*time.Millisecond))
	logA, _ := os.ReadFile(filepath.Join(e.state, "worker-a.log"))
	if !strings.Contains(string(logA), "attempt fenced") {
		e.dumpLogs()
		t.Fatal("host a's log does not say the attempt was fenced")
	}

	var res result
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Attempts != 2 {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
	t.Logf("scored %s after the cut", time.Since(cut).Round(time.Second))
	link.heal()
	time.Sleep(2 * hbTimeout) // host a reconnects: nothing of its attempt may move

	store, err := blob.NewFS(filepath.Join(e.state, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := checkpoint.New(store, checkpoint.Options{ChunkSize: 0}).List(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var tookOver time.Time
	for _, m := range ms {
		if m.Attempt == 2 && (tookOver.IsZero() || m.CreatedAt.Before(tookOver)) {
			tookOver = m.CreatedAt
		}
	}
	for _, m := range ms {
		if m.Attempt == 1 && (m.CreatedAt.After(tookOver) || m.SupersededBy != 0) {
			t.Fatalf("host a committed #%d at %s, after host b took over at %s (superseded by %d)", m.Seq, m.CreatedAt, tookOver, m.SupersededBy)
		}
	}
	var again result
	e.starterJSON(&again, "result", runID, "--json")
	if again.Checkpoints != res.Checkpoints || again.Budget != res.Budget {
		t.Fatalf("the result moved after host a came back: %+v, then %+v", res, again)
	}
}
