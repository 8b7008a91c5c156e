package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/testenv"
)

// slurmJobs lists mlrb's jobs in the real Slurm queue: id, name, state.
func slurmJobs(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("squeue", "--noheader", "--format", "%i %j %T").CombinedOutput()
	if err != nil {
		t.Fatalf("squeue: %v: %s", err, out)
	}
	var jobs []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(l, " mlrb:") {
			jobs = append(jobs, l)
		}
	}
	return jobs
}

func waitNoJobs(t *testing.T, e *env, within time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(slurmJobs(t)) > 0 {
		if time.Now().After(deadline) {
			e.dumpLogs()
			t.Fatalf("%s: jobs left in squeue %v", why, slurmJobs(t))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestSlurmRuns, on a real one-node Slurm with two (fake) A100s: with
// provision.kind slurm, a run on a one-GPU task submits a job per attempt
// and one for its evaluation, each running a worker for it. A preemption
// of the attempt's job (SIGTERM, as Slurm sends before it takes a node
// back) hands the attempt back with nothing lost and it resumes in a new
// job; the run is scored and no job is left. A run terminated while its
// job runs leaves a job the reaper cancels.
func TestSlurmRuns(t *testing.T) {
	testenv.Tool(t, "sbatch", "bash .ci/slurm (Debian's slurm-wlm and munge, a one-node cluster)")
	if jobs := slurmJobs(t); len(jobs) > 0 {
		t.Fatalf("mlrb jobs already queued: %v", jobs)
	}
	e := crashEnv(t, hbTimeout)
	e.vars = append(e.vars, "MLRB_PROVISION_KIND=slurm", "MLRB_PROVISION_SLURM_WORKER="+filepath.Join(bin, "worker"),
		"MLRB_PROVISION_SLURM_WORK_DIR="+filepath.Join(e.state, "slurm"), "MLRB_PROVISION_REAP_INTERVAL=2s", "MLRB_PROVISION_MARGIN=5m")
	e.addTask("e2e_gpu", "mini_baby_lm", map[string]string{
		`resources: {gpu_type: "", gpu_count: 0`: `resources: {gpu_type: "A100-40GB", gpu_count: 1`,
		"trials: 24":                             "trials: 15",
		"trial_seconds: 0.4":                     "trial_seconds: 0.8",
	})
	e.start("worker", "--dev")
	e.waitServer()

	runID := e.startRun("--task", "e2e_gpu", "--agent", "reference", "--seed", "1", "--time-limit", "40s")
	e.waitCheckpoints(runID, 2)
	jobs := slurmJobs(t)
	if len(jobs) != 1 || !strings.Contains(jobs[0], "mlrb:"+runID+":a1 RUNNING") {
		t.Fatalf("the attempt's job: %v", jobs)
	}
	id := strings.Fields(jobs[0])[0]
	if out, err := exec.Command("scancel", "--batch", "--signal=TERM", id).CombinedOutput(); err != nil {
		t.Fatalf("scancel --signal=TERM: %v: %s", err, out)
	}
	var res result
	e.starterJSON(&res, "result", runID, "--wait", "--json")
	if res.Outcome != "scored" || res.Attempts != 2 || res.Budget.LostS != 0 {
		e.dumpLogs()
		t.Fatalf("result = %+v", res)
	}
	if res.Cost.GPUHours <= 0 || res.Cost.BilledGPUHours < res.Cost.GPUHours {
		t.Fatalf("cost: %.5f GPU h used, %.5f billed", res.Cost.GPUHours, res.Cost.BilledGPUHours)
	}
	t.Logf("cost: %.5f GPU h used by the agent of %.5f GPU h billed", res.Cost.GPUHours, res.Cost.BilledGPUHours)
	waitNoJobs(t, e, 15*time.Second, "after the run ended")

	orphan := e.startRun("--task", "e2e_gpu", "--agent", "reference", "--seed", "2", "--time-limit", "40s")
	e.waitCheckpoints(orphan, 1)
	if err := e.client().TerminateWorkflow(context.Background(), orphan, "", "operator"); err != nil {
		t.Fatal(err)
	}
	waitNoJobs(t, e, 20*time.Second, "the reaper left the terminated run's job")
}
