// Host is the machine a worker runs on: its GPU leases, its work disk and what its earlier workers left.

package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/fleet/gpu"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// Host is the machine the worker runs on: its name and queue, its GPU
// pool and its work disk.
type Host struct {
	HostID    string
	HostQueue string
	GPUType   string
	GPUs      *gpu.Pool
	WorkDir   string
	// Observe is how agents' processes and GPUs are sampled here.
	Observe observe.Options
}

// Runs is where runs' checkpoints live.
type Runs struct {
	Engine *checkpoint.Engine
	// Keep is how many checkpoints per run retention keeps (plus finals).
	Keep int
}

// Leases hands out this host's GPU slots.
type Leases struct {
	Host
	// Client tells whether a lease's owner has ended (nil: leases wait
	// out their TTL).
	Client client.Client
}

// AcquireLease takes a GPU slot on this host for one attempt and names
// the host queue the attempt must run on.
func (a *Leases) AcquireLease(ctx context.Context, req activities.LeaseRequest) (*activities.Lease, error) {
	token := runs.Holder{RunID: req.RunID, Role: req.Role, N: req.Attempt}.Token()
	if req.GPUCount > 0 && a.GPUType != "" && req.GPUType != "" && req.GPUType != a.GPUType {
		return nil, temporal.NewApplicationError(fmt.Sprintf("host %s has %s GPUs, the task needs %s", a.HostID, a.GPUType, req.GPUType), activities.ErrNoCapacity)
	}
	owner := ""
	if activity.IsActivity(ctx) {
		we := activity.GetInfo(ctx).WorkflowExecution
		owner = we.ID + "/" + we.RunID
	}
	devs, err := a.GPUs.Acquire(token, owner, req.GPUCount)
	if errors.Is(err, gpu.ErrNoCapacity) && !req.AtOnce && a.Client != nil && a.GPUs.Reclaim(func(o string) bool { return a.ended(ctx, o) }) > 0 {
		devs, err = a.GPUs.Acquire(token, owner, req.GPUCount)
	}
	if errors.Is(err, gpu.ErrNoCapacity) {
		return nil, temporal.NewApplicationError(fmt.Sprintf("host %s: %v", a.HostID, err), activities.ErrNoCapacity)
	}
	if err != nil {
		return nil, fmt.Errorf("lease on %s: %w", a.HostID, err)
	}
	return &activities.Lease{HostID: a.HostID, HostQueue: a.HostQueue, Devices: devs, Token: token}, nil
}

// ended tells whether the workflow execution that owns a lease has
// closed: terminated, cancelled, failed, timed out or completed without
// releasing it, or gone from the server. One that continued as new may
// still mean to use it, and an unanswered question keeps the lease: it
// still ends with its TTL.
func (a *Leases) ended(ctx context.Context, owner string) bool {
	// Workflow ids hold slashes (bench/agent/task/s1); run ids never do.
	i := strings.LastIndex(owner, "/")
	if i < 0 {
		return false
	}
	wid, rid := owner[:i], owner[i+1:]
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := a.Client.DescribeWorkflowExecution(qctx, wid, rid)
	if errors.As(err, new(*serviceerror.NotFound)) {
		return true
	}
	if err != nil {
		return false
	}
	switch d.GetWorkflowExecutionInfo().GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return false
	}
	return true
}

// ReleaseLease gives the slot back.
func (a *Leases) ReleaseLease(_ context.Context, l activities.Lease) error {
	a.GPUs.Release(l.Token)
	return nil
}

// Sweep removes what attempts and evaluations of an earlier worker on
// this host left (a worker killed mid-attempt cannot clean up): once its
// tasks are reaped, none of it belongs to anything live, and the runs
// resume from their checkpoints.
func (h *Host) Sweep() error {
	for _, d := range []string{"runs", "eval", "doors"} {
		if err := os.RemoveAll(filepath.Join(h.WorkDir, d)); err != nil {
			return fmt.Errorf("sweep %s: %w", d, err)
		}
	}
	return nil
}

// DoorDir holds the gateway socket of one task (an attempt, an
// evaluation), mounted into its door container: <work>/doors/<hash>,
// short for a unix socket's 107-byte path limit whatever the run id.
func (h *Host) DoorDir(task string) string {
	sum := sha256.Sum256([]byte(task))
	return filepath.Join(h.WorkDir, "doors", hex.EncodeToString(sum[:8]))
}

func WriteJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// FreeBytes is the space left to an unprivileged writer under dir.
func FreeBytes(dir string) (int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// ReleaseOwn gives an ended attempt's lease back on this host, so that the
// run does not have to reach the host again (it may be stopping).
func (h *Host) ReleaseOwn(token string) bool {
	if h.GPUs == nil || token == "" {
		return false
	}
	h.GPUs.Release(token)
	return true
}

// IncompleteWhy says why a checkpoint left entries out.
func IncompleteWhy(m *checkpoint.Manifest) string {
	if m.Incomplete != "" {
		return m.Incomplete
	}
	// Saved before the reason was kept: the entry bound was the only one.
	return "the workspace held more entries than agent.workspace_max_entries"
}
