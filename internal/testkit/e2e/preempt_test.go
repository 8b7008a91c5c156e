package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

// TestSpotNoticeHandsBack: host a is a spot instance whose metadata
// service (AWS's own simulator) posts an interruption notice mid-run.
// Its worker stops as on SIGTERM: the agent is checkpointed and handed
// back with nothing lost, and the run finishes on host b.
func TestSpotNoticeHandsBack(t *testing.T) {
	parallel(t)
	mock := testenv.Tool(t, "ec2-metadata-mock", "go install github.com/aws/amazon-ec2-metadata-mock/cmd/ec2-metadata-mock@v1.13.0")
	e := crashEnv(t, hbTimeout)
	e.startAs("server", nil, "worker", "--dev", "--server-only")
	e.waitServer()
	imds := freePort(t)
	a := e.startAs("worker-a", []string{"MLRB_HOST_ID=a", "MLRB_HOST_WORK_DIR=" + filepath.Join(e.state, "work-a"),
		"MLRB_HOST_PREEMPTION=ec2-spot", "MLRB_HOST_IMDS_ENDPOINT=http://127.0.0.1:" + strconv.Itoa(imds)}, "worker")
	runID := e.startRun("--task", "e2e_crash", "--agent", "reference", "--seed", "4", "--time-limit", "40s")
	e.waitCheckpoints(runID, 2)
	e.startAs("worker-b", []string{"MLRB_HOST_ID=b", "MLRB_HOST_WORK_DIR=" + filepath.Join(e.state, "work-b")}, "worker")

	sim := exec.Command(mock, "spot", "-p", strconv.Itoa(imds))
	sim.Stdout, sim.Stderr = os.Stderr, os.Stderr
	if err := sim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Process.Signal(syscall.SIGTERM); _ = sim.Wait() })
	notice := time.Now()
	for alive(a.cmd.Process.Pid) && time.Since(notice) < 30*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(a.cmd.Process.Pid) {
		e.dumpLogs()
		t.Fatal("host a's worker did not stop on the spot notice")
	}
	t.Logf("host a stopped %s after the notice appeared", time.Since(notice).Round(100*time.Millisecond))
	logA, _ := os.ReadFile(filepath.Join(e.state, "worker-a.log"))
	if !strings.Contains(string(logA), "preemption notice") {
		t.Fatal("host a's log does not name the notice")
	}

	var res result
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Attempts != 2 || res.Budget.LostS != 0 {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
}
