// Package provision obtains GPU hosts for attempts and gives them back:
// each provisioned host is a worker started for one attempt, on a host
// queue named for it, so that the attempt's lease and agent go there.
package provision

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/mlrb/mlrb/deploy"
)

// Provider is one way of obtaining hosts (provision.kind).
type Provider interface {
	// Launch obtains the attempt's host; a retried launch finds the host
	// the first one obtained instead of obtaining another.
	Launch(ctx context.Context, r Request) (Job, error)
	// Stop gives a host back; one already gone is not an error.
	Stop(ctx context.Context, id string) error
	// List lists the hosts this provider obtained that still exist.
	List(ctx context.Context) ([]Job, error)
}

// Request is what an attempt needs.
type Request struct {
	RunID    string
	Attempt  int
	GPUType  string // the task's, e.g. A100-40GB
	GPUCount int
	// TimeLimit is how long the host may live: the budget left and a
	// margin for restore, final checkpoint and evaluation.
	TimeLimit time.Duration
}

// Job is one provisioned host running a worker for one attempt: a
// Slurm job or an EC2 instance. Name carries the run and attempt.
type Job struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	HostID string `json:"host_id"`
	State  string `json:"state,omitempty"`
}

// Slurm submits a batch job per attempt that runs a worker with the
// job's own host id and devices.
type Slurm struct {
	// Worker is the command the job runs (the worker binary, its flags);
	// the job inherits the submitting worker's environment (MLRB_*
	// config, its temporal.address and storage).
	Worker    []string
	Partition string
	// WorkDir is where each job's worker keeps its workspaces (a
	// directory per job under it).
	WorkDir string
}

// namePrefix marks mlrb's jobs; the rest of the name is the run and
// attempt, so that a reaper can find the run of any job.
const namePrefix = "mlrb:"

// JobName names an attempt's job.
func JobName(runID string, attempt int) string {
	return fmt.Sprintf("%s%s:a%d", namePrefix, runID, attempt)
}

// ParseJobName is JobName backwards.
func ParseJobName(name string) (runID string, attempt int, ok bool) {
	rest, found := strings.CutPrefix(name, namePrefix)
	i := strings.LastIndex(rest, ":a")
	if !found || i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[i+2:])
	if err != nil {
		return "", 0, false
	}
	return rest[:i], n, true
}

// HostID is the host id of an attempt's job: known before submission, so
// that the run can lease on its queue while the job waits to start.
func HostID(runID string, attempt int) string {
	r := strings.NewReplacer("/", "-", ":", "-", " ", "-", "#", "-")
	return fmt.Sprintf("slurm-%s-a%d", r.Replace(runID), attempt)
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
	name := JobName(r.RunID, r.Attempt)
	if jobs, err := s.List(ctx); err != nil {
		return Job{}, err
	} else {
		for _, j := range jobs {
			if j.Name == name {
				return j, nil
			}
		}
	}
	host := HostID(r.RunID, r.Attempt)
	script, err := render("slurm-job.sh", deploy.SlurmJob, struct{ HostID, GPUType, WorkDir, Worker string }{
		host, r.GPUType, s.WorkDir + "/" + host, shellJoin(s.Worker)})
	if err != nil {
		return Job{}, err
	}
	args := []string{"--parsable", "--job-name", name, "--output", s.WorkDir + "/" + host + ".log",
		"--time", strconv.Itoa(max(1, int(r.TimeLimit.Minutes()+0.999))), "--export", "ALL"}
	if r.GPUCount > 0 {
		args = append(args, fmt.Sprintf("--gres=gpu:%s:%d", GRES(r.GPUType), r.GPUCount))
	}
	if s.Partition != "" {
		args = append(args, "--partition", s.Partition)
	}
	out, err := runIn(ctx, script, "sbatch", args...)
	if err != nil {
		return Job{}, fmt.Errorf("sbatch %s: %w", name, err)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	return Job{ID: id, Name: name, HostID: host}, nil
}

// Stop cancels a job (SIGTERM to its worker, which hands its attempt
// back); a job already gone is not an error.
func (s *Slurm) Stop(ctx context.Context, id string) error {
	if _, err := run(ctx, "scancel", id); err != nil {
		return fmt.Errorf("scancel %s: %w", id, err)
	}
	return nil
}

// List lists mlrb's jobs in the queue.
func (s *Slurm) List(ctx context.Context) ([]Job, error) {
	out, err := run(ctx, "squeue", "--noheader", "--format", "%i|%j|%T")
	if err != nil {
		return nil, fmt.Errorf("squeue: %w", err)
	}
	var jobs []Job
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 || !strings.HasPrefix(f[1], namePrefix) {
			continue
		}
		runID, attempt, ok := ParseJobName(f[1])
		if !ok {
			continue
		}
		jobs = append(jobs, Job{ID: f[0], Name: f[1], HostID: HostID(runID, attempt), State: f[2]})
	}
	return jobs, nil
}

func run(ctx context.Context, name string, args ...string) (string, error) {
	return runIn(ctx, "", name, args...)
}

// runIn runs a Slurm command with stdin (sbatch reads its script there).
func runIn(ctx context.Context, stdin, name string, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
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

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
