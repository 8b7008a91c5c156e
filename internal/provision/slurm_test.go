package provision

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/testenv"
)

// TestSlurmJobLifecycle, on a real Slurm (.ci/slurm sets one up): an
// attempt's job asks for its GPUs by GRES, runs the worker command with
// the job's host id and devices, is found again (not submitted twice) by
// a retried request, and is gone from the queue once cancelled.
func TestSlurmJobLifecycle(t *testing.T) {
	testenv.Tool(t, "sbatch", "bash .ci/slurm (Debian's slurm-wlm and munge, a one-node cluster)")
	ctx := context.Background()
	dir := t.TempDir()
	out := filepath.Join(dir, "seen")
	s := &Slurm{Worker: []string{"/bin/sh", "-c", `echo "$MLRB_HOST_ID $MLRB_HOST_GPU_DEVICES $MLRB_HOST_GPU_TYPE" > ` + out + `; sleep 120`}, WorkDir: dir}
	req := Request{RunID: "bench/agent/task/s1", Attempt: 2, GPUType: "A100-40GB", GPUCount: 1, TimeLimit: 5 * time.Minute}
	job, err := s.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background(), job.ID) })
	again, err := s.Launch(ctx, req)
	if err != nil || again.ID != job.ID {
		t.Fatalf("a retried submit: %+v, %v; first was %s", again, err, job.ID)
	}
	var seen string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if b, err := os.ReadFile(out); err == nil && len(b) > 0 {
			seen = strings.TrimSpace(string(b))
			break
		}
	}
	if want := "slurm-bench-agent-task-s1-a2 0 A100-40GB"; seen != want {
		t.Fatalf("the job's worker saw %q, want %q", seen, want)
	}
	jobs, err := s.List(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].ID != job.ID || jobs[0].HostID != "slurm-bench-agent-task-s1-a2" {
		t.Fatalf("list = %+v, %v", jobs, err)
	}
	if err := s.Stop(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		jobs, err := s.List(ctx)
		if err == nil && len(jobs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still queued after scancel: %+v", jobs)
		}
	}
}

func TestJobNames(t *testing.T) {
	run, n, ok := ParseJobName(JobName("b/a:x/t/s1", 12))
	if !ok || run != "b/a:x/t/s1" || n != 12 || GRES("A100-80GB") != "a100" {
		t.Fatalf("%q %d %v", run, n, ok)
	}
	if _, _, ok := ParseJobName("train-llama"); ok {
		t.Fatal("a job that is not mlrb's")
	}
}
