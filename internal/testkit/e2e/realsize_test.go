package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
)

// TestRealSizeContainerWorkspace: an agent image writes 2 GiB of
// incompressible data and a model whose weights are hardlinked into
// output/, under a 3 s heartbeat timeout and one transfer at a time. Its
// container is killed mid-run; the attempt is handed back with its work
// saved, the run resumes in a new container from the 2 GiB checkpoint,
// ends, and the final checkpoint is evaluated and scored: exactly two
// attempts, none lost to a heartbeat timeout, the hardlink intact, and no
// workspace or evaluation dir left on the worker.
func TestRealSizeContainerWorkspace(t *testing.T) {
	parallel(t)
	testtaskImage(t, "bulk:e2e", "bulk", "2048")
	e := containerAgentEnv(t, "MLRB_AGENT_HEARTBEAT_TIMEOUT=3s", "MLRB_STORAGE_PARALLEL=1", "MLRB_CHECKPOINT_INTERVAL=10s", "MLRB_AGENT_GRACE=5s")
	host := "e2e-" + strings.ToLower(t.Name())
	runID := e.startRun("--task", "e2e_container", "--label", "e2e-image", "--image", "bulk:e2e", "--provider", "openai", "--seed", "1", "--time-limit", "20m")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if logs, _, _ := e.starter("logs", runID); strings.Contains(logs, "wrote 2048 MiB") {
			break
		}
		if time.Now().After(deadline) {
			e.dumpLogs()
			t.Fatal("the agent did not write its data in time")
		}
		time.Sleep(500 * time.Millisecond)
	}
	res := e.killAgentThenResult(host, runID)
	for _, ev := range e.history(runID).Events {
		if ev.EventType == enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT {
			t.Fatalf("an activity timed out: %v", ev.GetActivityTaskTimedOutEventAttributes())
		}
	}
	logs, _, _ := e.starter("logs", runID)
	if !strings.Contains(logs, "resumed: bulk 2147483648 bytes (<nil>), model hardlink intact true") {
		t.Fatalf("the resumed container did not find the 2 GiB and the hardlinked model:\n%s", logs)
	}
	if res.Budget.LostS > 1 {
		t.Fatalf("a handed-back attempt loses nothing: lost %.1f s", res.Budget.LostS)
	}
	for _, d := range []string{"runs", "eval"} {
		if entries, _ := os.ReadDir(filepath.Join(e.state, "work", d)); len(entries) != 0 {
			t.Errorf("work/%s still holds %s after the run", d, entries[0].Name())
		}
	}
	t.Logf("scored %.3f in %d attempts, %d checkpoints, budget %+v", *res.Score, res.Attempts, res.Checkpoints, res.Budget)
}
