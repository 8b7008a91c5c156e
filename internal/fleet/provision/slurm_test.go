package provision

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

// TestSlurmJobLifecycle, on a real Slurm (.ci/slurm sets one up): an
// attempt's job asks for its GPUs by GRES, runs the worker command with
// the job's host id and devices, is found again (not submitted twice) by
// a retried request, and is gone from the queue once cancelled.
func TestSlurmJobLifecycle(t *testing.T) {
	testenv.Tool(t, "sbatch", "bash .ci/slurm (Debian's slurm-wlm and munge, a one-node cluster)")
	testenv.Hold(t, "slurm")
	ctx := context.Background()
	dir := t.TempDir()
	out := filepath.Join(dir, "seen")
	s := &Slurm{Worker: []string{"/bin/sh", "-c", `echo "$MLRB_HOST_ID $MLRB_HOST_GPU_DEVICES $MLRB_HOST_GPU_TYPE" > ` + out + `; sleep 120`}, WorkDir: dir}
	req := Request{Holder: runs.Holder{RunID: "bench/agent/task/s1", N: 2}, GPUType: "A100-40GB", GPUCount: 1, TimeLimit: 5 * time.Minute}
	job, err := s.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background(), job) })
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
	if want := HostID(runs.Holder{RunID: "bench/agent/task/s1", N: 2}) + " 0 A100-40GB"; seen != want {
		t.Fatalf("the job's worker saw %q, want %q", seen, want)
	}
	jobs, err := s.List(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].ID != job.ID || jobs[0].HostID != HostID(runs.Holder{RunID: "bench/agent/task/s1", N: 2}) {
		t.Fatalf("list = %+v, %v", jobs, err)
	}
	if err := s.Stop(ctx, job); err != nil {
		t.Fatal(err)
	}
	// Stop returns once the job has left the queue: its allocation is over.
	if jobs, err := s.List(ctx); err != nil || len(jobs) != 0 {
		t.Fatalf("queued after Stop returned: %+v, %v", jobs, err)
	}
}

// TestSlurmSubmitTimeoutAndRequeue, on a real Slurm: a submit whose
// answer times out after slurmctld took the job is not submitted again,
// a requeued job still has its credentials, and once Stop returns no job
// is left in the queue and the credentials are gone.
func TestSlurmSubmitTimeoutAndRequeue(t *testing.T) {
	real := testenv.Tool(t, "sbatch", "bash .ci/slurm (Debian's slurm-wlm and munge, a one-node cluster)")
	testenv.Hold(t, "slurm")
	ctx := context.Background()
	dir := t.TempDir()
	wrap := filepath.Join(dir, "bin")
	if err := os.Mkdir(wrap, 0o755); err != nil {
		t.Fatal(err)
	}
	// The first submit reaches slurmctld, then its answer never comes back in time.
	once := filepath.Join(dir, "timed-out")
	script := "#!/bin/sh\nif [ ! -e " + once + " ]; then touch " + once + "; " + real + " \"$@\" >/dev/null; exec sleep 30; fi\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(wrap, "sbatch"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", wrap+":"+os.Getenv("PATH"))
	out := filepath.Join(dir, "seen")
	s := &Slurm{Worker: []string{"/bin/sh", "-c", `echo "$MLRB_TEST_TOKEN" >> ` + out + `; sleep 300`}, WorkDir: dir, Timeout: 3 * time.Second,
		Deployment: "requeue-test", Environ: func() []string { return []string{"MLRB_TEST_TOKEN=s3cret", "PATH=" + os.Getenv("PATH")} }}
	req := Request{Holder: runs.Holder{RunID: "bench/agent/task/s9", N: 1}, TimeLimit: 5 * time.Minute}
	job, err := s.Launch(ctx, req)
	if err != nil {
		t.Fatalf("a submit that timed out after the job was queued: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background(), job) })
	if again, err := s.Launch(ctx, req); err != nil || again.ID != job.ID {
		t.Fatalf("retried submit: %+v, %v; want job %s", again, err, job.ID)
	}
	if jobs, _ := s.List(ctx); len(jobs) != 1 {
		t.Fatalf("jobs after a timed-out submit and a retry: %+v", jobs)
	}
	lines := func() []string {
		b, _ := os.ReadFile(out)
		return strings.Fields(string(b))
	}
	waitLines := func(n int) {
		for deadline := time.Now().Add(90 * time.Second); len(lines()) < n; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the job's worker ran %d times, want %d: %q", len(lines()), n, lines())
			}
		}
	}
	waitLines(1)
	if b, err := exec.Command("scontrol", "requeue", job.ID).CombinedOutput(); err != nil {
		t.Fatalf("scontrol requeue: %v %s", err, b)
	}
	// A requeued job waits for a begin time (Slurm's guard against what
	// follows); let it start now, but not within the second of the
	// requeue: slurmd refuses a credential made no later than the second
	// the job's old one was revoked (stamped as the old batch script
	// ends, moments after the requeue), "Job credential revoked", and
	// the job then ends instead of running again.
	time.Sleep(3 * time.Second)
	for deadline := time.Now().Add(60 * time.Second); len(lines()) < 2 && time.Now().Before(deadline); time.Sleep(time.Second) {
		_ = exec.Command("scontrol", "update", "JobId="+job.ID, "StartTime=now").Run()
	}
	waitLines(2)
	if got := lines(); got[0] != "s3cret" || got[1] != "s3cret" {
		t.Fatalf("the requeued job's credentials: %q", got)
	}
	if err := s.Stop(ctx, job); err != nil {
		t.Fatal(err)
	}
	if jobs, err := s.List(ctx); err != nil || len(jobs) != 0 {
		t.Fatalf("queued after Stop returned: %+v, %v", jobs, err)
	}
	if _, err := os.Stat(s.credFile(job.HostID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("credentials left after the job: %v", err)
	}
}

func TestJobNames(t *testing.T) {
	want := runs.Holder{RunID: "b/a:x/t/s1", Role: runs.RoleEvaluation, N: 12}
	h, ok := ParseJobName(JobName(want))
	if !ok || h != want || GRES("A100-80GB") != "a100" {
		t.Fatalf("%+v %v", h, ok)
	}
	if _, ok := ParseJobName("train-llama"); ok {
		t.Fatal("a job that is not mlrb's")
	}
}

// TestJobEnvExportsNoCredential is audit #13: sbatch --export ALL put
// every secret of the worker's environment into slurmctld's records.
// The export list names settings only; credentials go through a file the
// job's user alone reads; anything else (an agent key) does not go.
func TestJobEnvExportsNoCredential(t *testing.T) {
	export, creds := jobEnv([]string{
		"PATH=/usr/bin", "MLRB_TEMPORAL_ADDRESS=tmprl:7233", "MLRB_STORAGE_S3_SECRET_ACCESS_KEY=s3-secret",
		"MLRB_TEMPORAL_API_KEY=tmprl-key", "AWS_SESSION_TOKEN=aws-token", "OPENAI_API_KEY=sk-agent", "MLRB_STORAGE_KIND=s3",
	})
	for _, name := range export {
		if credential(name) || name == "OPENAI_API_KEY" {
			t.Errorf("%s is exported", name)
		}
	}
	for _, want := range []string{"MLRB_TEMPORAL_ADDRESS", "MLRB_STORAGE_KIND", "PATH"} {
		if !slices.Contains(export, want) {
			t.Errorf("%s is not exported: %v", want, export)
		}
	}
	if len(creds) != 3 || creds["MLRB_STORAGE_S3_SECRET_ACCESS_KEY"] != "s3-secret" || creds["AWS_SESSION_TOKEN"] != "aws-token" {
		t.Fatalf("credentials %v", creds)
	}
	p := filepath.Join(t.TempDir(), "job.cred")
	if err := writeCredentials(p, creds); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file %v, %v", st, err)
	}
	out, err := exec.Command("sh", "-c", ". "+p+"; printf %s \"$MLRB_TEMPORAL_API_KEY\"").Output()
	if err != nil || string(out) != "tmprl-key" {
		t.Fatalf("the job's shell reads %q, %v", out, err)
	}
}

// TestNamesAreOneRunsOwn is audit #18: b/a/t/s1 and the valid plain id
// b-a-t-s1 got the same Slurm host id (so one run's lease could land on
// the other's job), as b/a/t/s1 and b_a_t_s1 got one container name.
func TestNamesAreOneRunsOwn(t *testing.T) {
	if HostID(runs.Holder{RunID: "b/a/t/s1", N: 1}) == HostID(runs.Holder{RunID: "b-a-t-s1", N: 1}) {
		t.Fatal("two runs share a host id")
	}
}

// Audit L1: the credentials file never outlives its use. A submit that
// fails removes it, a cancel that fails removes it all the same, a
// sweep removes old ones no queued job will read, and writing one over
// a link replaces the link instead of writing through it.
func TestSlurmCredentialsNeverLeftBehind(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"squeue": "exit 0", "sbatch": "echo refused >&2; exit 1", "scancel": "echo timed out >&2; exit 1"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	s := &Slurm{Worker: []string{"true"}, WorkDir: dir, Timeout: 5 * time.Second,
		Environ: func() []string { return []string{"MLRB_STORAGE_S3_SECRET_ACCESS_KEY=s3cret"} }}
	h := runs.Holder{RunID: "bench/agent/task/s1", N: 1}
	if _, err := s.Launch(context.Background(), Request{Holder: h, TimeLimit: time.Minute}); err == nil {
		t.Fatal("a refused submit succeeded")
	}
	if _, err := os.Stat(s.credFile(HostID(h))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("credentials left by a refused submit: %v", err)
	}

	job := Job{ID: "7", HostID: HostID(h)}
	if err := writeCredentials(s.credFile(job.HostID), map[string]string{"K": "v"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background(), job); err == nil {
		t.Fatal("a failed scancel was not reported")
	}
	if _, err := os.Stat(s.credFile(job.HostID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("credentials left by a failed cancel: %v", err)
	}

	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, s.credFile("linked")); err != nil {
		t.Fatal(err)
	}
	if err := writeCredentials(s.credFile("linked"), map[string]string{"K": "v"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("written through a link: %q", b)
	}

	old := time.Now().Add(-time.Hour)
	for _, host := range []string{"stale", "queued"} {
		if err := writeCredentials(s.credFile(host), nil); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(s.credFile(host), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sweep([]Job{{ID: "8", HostID: "queued"}}); err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{"stale": false, "queued": true, "linked": true} {
		if _, err := os.Lstat(s.credFile(host)); (err == nil) != want {
			t.Errorf("%s: kept = %v, want %v", host, err == nil, want)
		}
	}
}
