package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/scoring/evaldata"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
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
	parallel(t)
	testenv.Hold(t, "slurm") // one Slurm cluster, two GPUs: one test at a time
	testenv.Tool(t, "sbatch", "bash .ci/slurm (Debian's slurm-wlm and munge, a one-node cluster)")
	if jobs := slurmJobs(t); len(jobs) > 0 {
		t.Fatalf("mlrb jobs already queued: %v", jobs)
	}
	e := crashEnv(t, hbTimeout)
	// The first submit reaches slurmctld, but its answer comes after the
	// command timeout: the job is found, not submitted again.
	wrap := filepath.Join(e.state, "wrap")
	real := testenv.Find("sbatch")
	if err := os.MkdirAll(wrap, 0o755); err != nil {
		t.Fatal(err)
	}
	once := filepath.Join(wrap, "timed-out")
	script := "#!/bin/sh\nif [ ! -e " + once + " ]; then touch " + once + "; " + real + " \"$@\" >/dev/null; exec sleep 30; fi\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(wrap, "sbatch"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e.vars = append(e.vars, "PATH="+wrap+":"+os.Getenv("PATH"), "MLRB_PROVISION_SLURM_COMMAND_TIMEOUT=3s", "MLRB_PROVISION_KIND=slurm", "MLRB_PROVISION_SLURM_WORKER="+filepath.Join(bin, "worker"),
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
	if _, err := os.Stat(once); err != nil {
		t.Fatalf("no submit timed out: %v", err)
	}
	// A host is given back only once its job has left the queue, so the
	// result comes after the last one is gone, never before.
	if jobs := slurmJobs(t); len(jobs) > 0 {
		t.Fatalf("jobs still queued when the result came: %v", jobs)
	}

	orphan := e.startRun("--task", "e2e_gpu", "--agent", "reference", "--seed", "2", "--time-limit", "40s")
	e.waitCheckpoints(orphan, 1)
	if err := e.client().TerminateWorkflow(context.Background(), orphan, "", "operator"); err != nil {
		t.Fatal(err)
	}
	waitNoJobs(t, e, 20*time.Second, "the reaper left the terminated run's job")
}

// TestFullSuiteOnSlurmGPUs: `starter benchmark --suite full` with an
// image agent, on the real one-node Slurm whose two A100s are GRES backed
// by device files (no driver): every run's attempt and evaluation is a
// Slurm job asking for one A100, its containers get exactly the leased
// GPU's device file (container.gpus: devices; the agent and the
// evaluator each check it), and every run of the seven tasks is scored
// by a stand-in of the tasks' evaluator images (built here: no PyPI, hub
// or GPU), which writes lm-eval's results shape. No job is left after.
func TestFullSuiteOnSlurmGPUs(t *testing.T) {
	parallel(t)
	testenv.Hold(t, "slurm") // one Slurm cluster, two GPUs: one test at a time
	testenv.Tool(t, "sbatch", "bash .ci/slurm (Debian's slurm-wlm and munge, a one-node cluster)")
	if jobs := slurmJobs(t); len(jobs) > 0 {
		t.Fatalf("mlrb jobs already queued: %v", jobs)
	}
	eval := staticBinary(t, "internal/testkit/e2e/testdata/standineval")
	buildImage(t, "mlrb-standin-eval:e2e", "standineval", eval,
		"FROM scratch\nENV PATH=/usr/local/bin\nCOPY standineval /usr/local/bin/mlrb-eval-lmeval\nCOPY standineval /usr/local/bin/mlrb-eval-autoformalization\nCOPY standineval /usr/local/bin/mlrb-lean-check\n")
	buildImage(t, "mlrb-fullagent:e2e", "fullagent", staticBinary(t, "internal/testkit/e2e/testdata/fullagent"),
		"FROM scratch\nCOPY fullagent /fullagent\nCMD [\"/fullagent\"]\n")
	envFile := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(envFile, []byte("HUGGINGFACE_TOKEN=hf_e2e_full\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// math_reasoning's held-out set: the stand-in evaluator reads a set of
	// the test's own (ProofNet's is not fetched here), named by its hash.
	dataDir := t.TempDir()
	held := filepath.Join(dataDir, "proofnet", "test.jsonl")
	if err := os.MkdirAll(filepath.Dir(held), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(held, []byte(`{"nl_statement": "Show 1 = 1.", "nl_proof": "Trivial.", "formal_statement": "theorem t : 1 = 1 :="}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	heldSum, err := evaldata.Digest(held)
	if err != nil {
		t.Fatal(err)
	}
	e := dockerEnv(t, "MLRB_PROVISION_KIND=slurm", "MLRB_PROVISION_SLURM_WORKER="+filepath.Join(bin, "worker"), "MLRB_PROVISION_REAP_INTERVAL=2s",
		"MLRB_PROVISION_MARGIN=5m", "MLRB_CONTAINER_GPUS=devices", "MLRB_AGENT_ENV_FILE="+envFile, "MLRB_EVAL_DATA_DIR="+dataDir,
		"MLRB_AGENTS_DIR="+agentDefs(t, map[string]string{"full-4o": "image: mlrb-fullagent:e2e\nprovider: openai\nmodel: gpt-4o\nsecrets: [HUGGINGFACE_TOKEN]\n"}))
	e.vars = append(e.vars, "MLRB_PROVISION_SLURM_WORK_DIR="+filepath.Join(e.state, "slurm"))
	// The seven real tasks, each scored by the stand-in evaluator image.
	full := []string{"llm_efficiency", "baby_lm", "mini_pile", "llm_merging", "edge_llm_compression", "edge_llm_training", "math_reasoning"}
	for _, id := range full {
		edits := map[string]string{"  image: mlrb-evaluator:lm-eval-0.4.12": "  image: mlrb-standin-eval:e2e"}
		if id == "math_reasoning" {
			edits = map[string]string{"  image: mlrb-evaluator:autoformalization-lean3": "  image: mlrb-standin-eval:e2e",
				"sha256: sha256:4eae0ba4a6503d6828afb63b4936f9913cce299ef81a17c372e1b75b56187177": "sha256: " + heldSum}
		}
		e.addTask(id, id, edits)
	}
	e.start("worker", "--dev")
	e.waitServer()

	const bench = "full-suite"
	if _, errs, code := e.starter("benchmark", "--suite", "full", "--agents", "full-4o", "--seeds", "1", "--time-limit", "30s",
		"--concurrency", "2", "--id", bench); code != 0 {
		t.Fatalf("benchmark: %s", errs)
	}
	sawJobs := false
	deadline := time.Now().Add(15 * time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.client().GetWorkflow(ctx, bench, "").Get(ctx, nil) }()
	for waiting := true; waiting; {
		select {
		case err := <-done:
			if err != nil {
				e.dumpLogs()
				t.Fatalf("benchmark %s: %v", bench, err)
			}
			waiting = false
		case <-time.After(time.Second):
			for _, j := range slurmJobs(t) {
				if strings.Contains(j, "mlrb:"+bench+"/full-4o/") {
					sawJobs = true
				}
			}
		}
	}
	if !sawJobs {
		t.Fatal("no Slurm job ran the benchmark's runs")
	}
	exp := t.TempDir()
	if out, errs, code := e.starter("export", bench, "--format", "csv", "-o", exp); code != 0 {
		t.Fatalf("export (exit %d): %s %s", code, out, errs)
	}
	rows := readCSV(t, filepath.Join(exp, "runs.csv"))
	if len(rows) != len(full) {
		t.Fatalf("%d runs, want %d", len(rows), len(full))
	}
	for _, r := range rows {
		if r["outcome"] != "scored" || r["score"] == "" || r["hardware"] != "1× A100-40GB" || !strings.HasPrefix(r["agent_image"], "sha256:") ||
			!strings.HasPrefix(r["evaluator_image"], "sha256:") || num(t, r["billed_gpu_hours"]) <= 0 {
			out, _, _ := e.starter("result", r["run_id"])
			e.dumpLogs()
			t.Fatalf("run %s: %v\n%s", r["run_id"], r, out)
		}
	}
	table, _, _ := e.starter("results", bench)
	t.Logf("the full suite on Slurm GPUs:\n%s", table)
	waitNoJobs(t, e, 30*time.Second, "after the full suite ended")
}
