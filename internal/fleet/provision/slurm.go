// Slurm: a batch job per attempt that runs a worker with the job's own host id and devices, its credentials written 0600 and swept after.

package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mlrb/mlrb/deploy"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// Slurm submits a batch job per attempt that runs a worker with the
// job's own host id and devices.
type Slurm struct {
	// Worker is the command the job runs (the worker binary, its flags);
	// the job gets the submitting worker's MLRB_* settings (its
	// temporal.address and storage) and credentials (jobEnv).
	Worker    []string
	Partition string
	// Deployment names this mlrb deployment (namespace/task queue); its
	// jobs carry it, and List sees no other's.
	Deployment string
	// Environ is the environment jobs are made from (nil: this
	// process's).
	Environ func() []string
	// WorkDir is where each job's worker keeps its workspaces (a
	// directory per job under it).
	WorkDir string
	// Timeout bounds each Slurm command (0: 30 s).
	Timeout time.Duration
}

// namePrefix marks mlrb's jobs; the rest of the name is the run and
// attempt, so that a reaper can find the run of any job.
const namePrefix = "mlrb:"

// JobName names the job of h: mlrb:<run>[#evaluation]:a<n>.
func JobName(h runs.Holder) string {
	return fmt.Sprintf("%s%s:a%d", namePrefix, h.JobKey(), h.N)
}

// ParseJobName is JobName backwards.
func ParseJobName(name string) (runs.Holder, bool) {
	rest, found := strings.CutPrefix(name, namePrefix)
	i := strings.LastIndex(rest, ":a")
	if !found || i <= 0 {
		return runs.Holder{}, false
	}
	n, err := strconv.Atoi(rest[i+2:])
	if err != nil {
		return runs.Holder{}, false
	}
	return runs.ParseJobKey(rest[:i], n), true
}

// HostID is the host id of an attempt's job: known before submission, so
// that the run can lease on its queue while the job waits to start. A
// hash of the run id keeps it one run's: b/a/t/s1 and b-a-t-s1 read alike
// once made safe, and a lease on another run's queue would go to its job.
func HostID(h runs.Holder) string {
	r := strings.NewReplacer("/", "-", ":", "-", " ", "-", "#", "-")
	key := h.JobKey()
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("slurm-%s-%s-a%d", r.Replace(key), hex.EncodeToString(sum[:4]), h.N)
}

// jobDir is the work dir of a job's worker: named by a hash of its host id,
// whose run id can be long, so that the unix sockets of the attempt's
// door under it stay within the 107 bytes a socket path may take.
func jobDir(workDir, hostID string) string {
	sum := sha256.Sum256([]byte(hostID))
	return workDir + "/w-" + hex.EncodeToString(sum[:6])
}

// GRES is the Slurm GRES type of a GPU type: its model, lower case
// ("A100-40GB" -> "a100").
func GRES(gpuType string) string {
	model, _, _ := strings.Cut(gpuType, "-")
	return strings.ToLower(model)
}

// Launch submits (or finds, when a retried request already did) the
// attempt's job.
func (s *Slurm) Launch(ctx context.Context, r Request) (Job, error) {
	name := JobName(r.Holder)
	// Only this user's jobs of this deployment are adopted: a job of the
	// same name anyone else submitted is not this attempt's host.
	if j, ok, err := s.find(ctx, name); err != nil || ok {
		return j, err
	}
	host := HostID(r.Holder)
	export, creds := jobEnv(s.environ())
	if err := writeCredentials(s.credFile(host), creds); err != nil {
		return Job{}, err
	}
	queued := false
	defer func() {
		if !queued {
			_ = os.Remove(s.credFile(host)) // no job will read them
		}
	}()
	script, err := render("slurm-job.sh", deploy.SlurmJob, struct{ HostID, GPUType, WorkDir, Worker, Credentials string }{
		host, r.GPUType, jobDir(s.WorkDir, host), shellJoin(s.Worker), s.credFile(host)})
	if err != nil {
		return Job{}, err
	}
	args := []string{"--parsable", "--job-name", name, "--output", s.WorkDir + "/" + host + ".log",
		"--time", strconv.Itoa(max(1, int(r.TimeLimit.Minutes()+0.999))), "--export", strings.Join(export, ","), "--comment", s.comment()}
	if r.GPUCount > 0 {
		args = append(args, fmt.Sprintf("--gres=gpu:%s:%d", GRES(r.GPUType), r.GPUCount))
	}
	if s.Partition != "" {
		args = append(args, "--partition", s.Partition)
	}
	if _, err := s.runIn(ctx, script, "sbatch", args...); err != nil {
		// A submit that timed out here may have reached slurmctld all the
		// same: then its job is this attempt's.
		if j, ok, ferr := s.find(ctx, name); ferr == nil && ok {
			queued = true
			return j, nil
		}
		return Job{}, fmt.Errorf("sbatch %s: %w", name, err)
	}
	queued = true
	return s.only(ctx, name)
}

// find is this deployment's queued job of that name, if there is one.
func (s *Slurm) find(ctx context.Context, name string) (Job, bool, error) {
	jobs, err := s.named(ctx, name)
	if err != nil || len(jobs) == 0 {
		return Job{}, false, err
	}
	return jobs[0], true, nil
}

// named lists this deployment's queued jobs of that name, oldest first.
func (s *Slurm) named(ctx context.Context, name string) ([]Job, error) {
	jobs, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	jobs = slices.DeleteFunc(jobs, func(j Job) bool { return j.Name != name })
	slices.SortFunc(jobs, func(a, b Job) int { return cmpJobID(a.ID, b.ID) })
	return jobs, nil
}

// only keeps one job of that name after a submit: a submit whose answer
// was lost and that was retried before its job showed in the queue
// leaves two, and the later ones are cancelled.
func (s *Slurm) only(ctx context.Context, name string) (Job, error) {
	jobs, err := s.named(ctx, name)
	if err != nil {
		return Job{}, err
	}
	if len(jobs) == 0 {
		return Job{}, fmt.Errorf("sbatch %s: submitted, but the job is not in the queue", name)
	}
	for _, extra := range jobs[1:] {
		if _, err := s.run(ctx, "scancel", extra.ID); err != nil {
			return Job{}, fmt.Errorf("scancel a second job %s of %s: %w", extra.ID, name, err)
		}
	}
	return jobs[0], nil
}

// cmpJobID orders Slurm job ids by number (submission order).
func cmpJobID(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA != nil || errB != nil {
		return strings.Compare(a, b)
	}
	return x - y
}

// credFile holds a job's credentials for as long as it is queued: a
// requeued job (preempted, its node failed) runs its script again and
// reads them again.
func (s *Slurm) credFile(host string) string { return s.WorkDir + "/" + host + ".cred" }

// exportAlways are the variables a job's worker gets besides the MLRB_*
// settings: what any process expects to find.
var exportAlways = []string{"PATH", "HOME", "USER", "LANG", "TZ", "TMPDIR", "DOCKER_HOST"}

// jobEnv splits the submitting worker's environment for a job: the names
// sbatch exports (its MLRB_* settings, never a credential) and the
// credentials (AWS_*, and MLRB_* names of keys, secrets, tokens,
// passwords), which reach the job through a file only its user reads.
// sbatch keeps what it exports in slurmctld's state and, with
// AccountingStoreFlags=job_env, in the accounting database; nothing else
// of the worker's environment (an agent secret kept there) goes at all.
func jobEnv(environ []string) (export []string, creds map[string]string) {
	export, creds = slices.Clone(exportAlways), map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case credential(k):
			creds[k] = v
		case strings.HasPrefix(k, "MLRB_") && !slices.Contains(export, k):
			export = append(export, k)
		}
	}
	slices.Sort(export)
	return export, creds
}

func credential(name string) bool {
	if strings.HasPrefix(name, "AWS_") {
		return true
	}
	if !strings.HasPrefix(name, "MLRB_") {
		return false
	}
	for _, w := range []string{"KEY", "SECRET", "TOKEN", "PASSWORD"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// writeCredentials writes the job's credentials as shell assignments,
// readable by this user alone; the job script reads and removes it.
func writeCredentials(path string, creds map[string]string) error {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(creds)) {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(creds[k]))
	}
	// A file left by an earlier try goes (a link is removed, never
	// followed); the new one is created, 0600 from its first byte.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("job credentials: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("job credentials: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		_ = f.Close()
		return fmt.Errorf("job credentials: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("job credentials: %w", err)
	}
	return nil
}

// staleCredentials is how old a credentials file with no queued job
// must be before a sweep removes it: younger ones may be a submit's
// under way.
const staleCredentials = 10 * time.Minute

// Sweep removes the credentials files no queued job will read (a
// submit that failed, a cancel that did not answer), given the jobs
// List found.
func (s *Slurm) Sweep(jobs []Job) error {
	live := map[string]bool{}
	for _, j := range jobs {
		live[j.HostID] = true
	}
	files, err := filepath.Glob(filepath.Join(s.WorkDir, "*.cred"))
	if err != nil {
		return fmt.Errorf("sweep credentials: %w", err)
	}
	for _, f := range files {
		fi, err := os.Lstat(f)
		if err != nil || live[strings.TrimSuffix(filepath.Base(f), ".cred")] || time.Since(fi.ModTime()) < staleCredentials {
			continue
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sweep credentials: %w", err)
		}
	}
	return nil
}

func (s *Slurm) environ() []string {
	if s.Environ != nil {
		return s.Environ()
	}
	return os.Environ()
}

// Stop cancels a job (SIGTERM to its worker, which hands its attempt
// back) and returns once the job has left the queue: a job still
// COMPLETING holds its node and GPUs, and a lease that ended before its
// allocation would let the next one oversubscribe them. Then its
// credentials go. A job already gone is not an error.
func (s *Slurm) Stop(ctx context.Context, j Job) error {
	if j.HostID != "" {
		// Whatever scancel answers: a job that is gone reads them no more,
		// and one that is still queued is being cancelled.
		defer func() { _ = os.Remove(s.credFile(j.HostID)) }()
	}
	if _, err := s.run(ctx, "scancel", j.ID); err != nil {
		return fmt.Errorf("scancel %s: %w", j.ID, err)
	}
	for {
		out, err := s.run(ctx, "squeue", "--noheader", "--jobs", j.ID, "--format", "%T")
		state := strings.TrimSpace(out)
		if err != nil && !strings.Contains(err.Error(), "Invalid job id") {
			return fmt.Errorf("squeue job %s: %w", j.ID, err)
		}
		if err != nil || state == "" || jobEnded[state] {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s still %s after scancel: %w", j.ID, state, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// jobEnded are the states of a job whose allocation is over (squeue
// lists them for a while after the end).
var jobEnded = map[string]bool{"CANCELLED": true, "COMPLETED": true, "FAILED": true, "TIMEOUT": true, "NODE_FAIL": true,
	"PREEMPTED": true, "OUT_OF_MEMORY": true, "BOOT_FAIL": true, "DEADLINE": true}

// comment marks a job as this deployment's (sbatch --comment).
func (s *Slurm) comment() string { return namePrefix + s.Deployment }

// List lists this deployment's jobs in the queue, submitted by this
// user: a job of another user or deployment is never adopted or reaped,
// whatever its name.
func (s *Slurm) List(ctx context.Context) ([]Job, error) {
	args := []string{"--noheader", "--format", "%i|%j|%T|%k"}
	if u, err := user.Current(); err == nil {
		args = append(args, "--user", u.Username)
	}
	out, err := s.run(ctx, "squeue", args...)
	if err != nil {
		return nil, fmt.Errorf("squeue: %w", err)
	}
	var jobs []Job
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(line, "|", 4)
		if len(f) != 4 || !strings.HasPrefix(f[1], namePrefix) || f[3] != s.comment() {
			continue
		}
		h, ok := ParseJobName(f[1])
		if !ok {
			continue
		}
		jobs = append(jobs, Job{ID: f[0], Name: f[1], HostID: HostID(h), State: f[2]})
	}
	return jobs, nil
}

func (s *Slurm) run(ctx context.Context, name string, args ...string) (string, error) {
	return s.runIn(ctx, "", name, args...)
}

// runIn runs a Slurm command with stdin (sbatch reads its script there).
func (s *Slurm) runIn(ctx context.Context, stdin, name string, args ...string) (string, error) {
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	// A wrapper's child may hold the output open past the kill.
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
		return "", err
	}
	return string(out), nil
}
