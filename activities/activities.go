package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/subosito/gotenv"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/gpu"
	"github.com/mlrb/mlrb/internal/runtime"
	"github.com/mlrb/mlrb/tasks"
)

// Activities carries the engines the activities use. One value serves
// every activity of a worker.
type Activities struct {
	Catalog *tasks.Catalog
	Engine  *checkpoint.Engine
	Runtime runtime.Runtime
	// Client signals checkpoint commits to the run's workflow.
	Client    client.Client
	HostID    string
	HostQueue string
	GPUType   string
	GPUs      *gpu.Pool
	WorkDir   string
	// Keep is how many checkpoints per run retention keeps (plus finals).
	Keep int
	// Self is the mlrb binary; it runs the reference agent and evaluator.
	Self   string
	Logger *zap.Logger
	// EnvFile holds worker-side secrets (KEY=value lines) that runs name.
	EnvFile string
	// Docker, when set, runs agents and evaluators as containers.
	Docker     *runtime.Docker
	Containers Containers
}

// Containers configures the container runtime.
type Containers struct {
	AgentImage string
	EvalImage  string
	// Paths are checkpointed out of the agent's container.
	Paths []string
	// Workdir is MLRB_WORKDIR inside the container.
	Workdir string
	// Self is the mlrb binary inside the images.
	Self        string
	MemoryBytes int64
	CPUs        float64
	PidsLimit   int64
}

// Agents this worker knows how to start. "mlrb" runs an MLRB agent image
// with its own command, as MLRB's run.sh does.
var agentCommands = map[string][]string{
	"reference": {"{self}", "reference-agent"},
	"noop":      {"{self}", "noop-agent"},
	"mlrb":      nil,
}

// KnownAgents lists the agent names.
func KnownAgents() []string { return []string{"mlrb", "noop", "reference"} }

// ResolveTask loads the spec from this worker's catalog and hashes it.
func (a *Activities) ResolveTask(_ context.Context, in ResolveInput) (*ResolvedTask, error) {
	spec, err := a.Catalog.Get(in.Task)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadTask, nil)
	}
	if _, ok := agentCommands[in.Agent]; !ok {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("unknown agent %q (known: %s)", in.Agent, strings.Join(KnownAgents(), ", ")), ErrBadTask, nil)
	}
	if in.Agent == "mlrb" {
		if a.Docker == nil {
			return nil, temporal.NewNonRetryableApplicationError("agent mlrb runs an image: this worker needs host.runtime docker", ErrBadTask, nil)
		}
		if _, err := a.Docker.ImageDigest(context.Background(), in.Image); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadTask, nil)
		}
	} else if spec.Reference == nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("agent %q only does the mini suite; task %s needs a real agent image", in.Agent, spec.ID), ErrBadTask, nil)
	}
	return &ResolvedTask{Spec: *spec, Hash: spec.Hash()}, nil
}

// LoadCheckpoint describes a committed checkpoint of a run, for a fork.
func (a *Activities) LoadCheckpoint(ctx context.Context, src CheckpointSource) (*CheckpointRef, error) {
	var m *checkpoint.Manifest
	if src.Seq == 0 {
		var err error
		m, err = a.Engine.Latest(ctx, src.RunID)
		switch {
		case errors.Is(err, checkpoint.ErrNoCheckpoint) && src.IfAny:
			return nil, nil
		case errors.Is(err, checkpoint.ErrNoCheckpoint):
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadTask, err)
		case err != nil:
			return nil, err // the store may be back on the next try
		}
	} else {
		var err error
		if m, err = a.Engine.Load(ctx, src.RunID, src.Seq); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no checkpoint #%d of run %s: %v", src.Seq, src.RunID, err), ErrBadTask, nil)
		}
	}
	return &CheckpointRef{RunID: src.RunID, Seq: m.Seq, Attempt: m.Attempt, AgentSeconds: m.AgentSeconds, At: m.CreatedAt, Files: len(m.Files), Bytes: m.Bytes,
		Final: m.Final, Ending: m.Ending}, nil
}

// AcquireLease takes a GPU slot on this host for one attempt and names
// the host queue the attempt must run on.
func (a *Activities) AcquireLease(ctx context.Context, req LeaseRequest) (*Lease, error) {
	token := fmt.Sprintf("%s#%d", req.RunID, req.Attempt)
	if req.GPUCount > 0 && a.GPUType != "" && req.GPUType != "" && req.GPUType != a.GPUType {
		return nil, temporal.NewApplicationError(fmt.Sprintf("host %s has %s GPUs, the task needs %s", a.HostID, a.GPUType, req.GPUType), ErrNoCapacity)
	}
	devs, err := a.GPUs.Acquire(token, req.GPUCount)
	if errors.Is(err, gpu.ErrNoCapacity) {
		return nil, temporal.NewApplicationError(fmt.Sprintf("host %s: %v", a.HostID, err), ErrNoCapacity)
	}
	if err != nil {
		return nil, fmt.Errorf("lease on %s: %w", a.HostID, err)
	}
	info := activity.GetInfo(ctx)
	return &Lease{HostID: a.HostID, HostQueue: a.HostQueue, Devices: devs, Token: token, Waited: time.Since(info.ScheduledTime)}, nil
}

// ReleaseLease gives the slot back.
func (a *Activities) ReleaseLease(_ context.Context, l Lease) error {
	a.GPUs.Release(l.Token)
	return nil
}

func runKey(runID string) string { return url.PathEscape(runID) }

func (a *Activities) attemptDir(runID string, attempt int) string {
	return filepath.Join(a.WorkDir, "runs", runKey(runID), fmt.Sprintf("attempt-%d", attempt))
}

func (a *Activities) command(tmpl []string, vars map[string]string) []string {
	if tmpl == nil {
		return nil // the image's own command
	}
	out := make([]string, len(tmpl))
	for i, s := range tmpl {
		for k, v := range vars {
			s = strings.ReplaceAll(s, "{"+k+"}", v)
		}
		out[i] = s
	}
	return out
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// restoreLatest restores ref with restore, falling back to earlier
// checkpoints when a chunk is missing or corrupt; it returns the checkpoint
// restored.
func (a *Activities) restoreLatest(ctx context.Context, runID string, ref *CheckpointRef, restore func(*checkpoint.Manifest) error) (*checkpoint.Manifest, error) {
	for seq := ref.Seq; seq >= 1; seq-- {
		m, err := a.Engine.Load(ctx, runID, seq)
		if err != nil {
			a.Logger.Warn("checkpoint unreadable, trying the previous one", zap.String("run", runID), zap.Int("seq", seq), zap.Error(err))
			continue
		}
		err = restore(m)
		if err == nil {
			return m, nil
		}
		var ce *checkpoint.CorruptChunkError
		if !errors.As(err, &ce) {
			return nil, err
		}
		a.Logger.Warn("checkpoint damaged, trying the previous one", zap.String("run", runID), zap.Int("seq", seq), zap.Error(err))
	}
	return nil, fmt.Errorf("no restorable checkpoint of %s at or before #%d", runID, ref.Seq)
}

// signalCheckpoint tells the workflow about a commit; retried in the
// background because the server may be down for a while.
func (a *Activities) signalCheckpoint(ctx context.Context, ref CheckpointRef) {
	a.signal(ctx, SignalCheckpoint, ref)
}

// signal sends a signal to the activity's own workflow, retrying in the
// background.
func (a *Activities) signal(ctx context.Context, name string, arg any) {
	info := activity.GetInfo(ctx)
	wid, rid := info.WorkflowExecution.ID, info.WorkflowExecution.RunID
	go func() {
		delay := 200 * time.Millisecond
		for i := 0; i < 30; i++ {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := a.Client.SignalWorkflow(sctx, wid, rid, name, arg)
			cancel()
			if err == nil {
				return
			}
			a.Logger.Debug("signal not delivered yet", zap.String("signal", name), zap.Error(err))
			time.Sleep(delay)
			delay = min(2*delay, 5*time.Second)
		}
	}()
}

func killOnCancel(h runtime.Handle) {
	_ = h.Signal(syscall.SIGKILL)
}

func secondsEnv(d time.Duration) string { return strconv.Itoa(int(d.Seconds())) }

// imageDigest records which image really ran: the digest, not the tag.
func (a *Activities) imageDigest(ctx context.Context, image string) string {
	if a.Docker == nil || image == "" {
		return ""
	}
	d, err := a.Docker.ImageDigest(ctx, image)
	if err != nil {
		a.Logger.Warn("image digest", zap.String("image", image), zap.Error(err))
		return image
	}
	return d
}

// secretValues looks up the named secrets in the worker's env file, then
// its environment. Names travel through Temporal; values only from here
// to the agent.
func (a *Activities) secretValues(names []string) (map[string]string, error) {
	file := map[string]string{}
	if a.EnvFile != "" {
		f, err := gotenv.Read(a.EnvFile)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("agent.env_file %s: %v", a.EnvFile, err), ErrBadTask, nil)
		}
		file = f
	}
	out := map[string]string{}
	for _, n := range names {
		v, ok := file[n]
		if !ok {
			v, ok = os.LookupEnv(n)
		}
		if !ok || v == "" {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("secret %s is in neither agent.env_file nor the worker's environment", n), ErrBadTask, nil)
		}
		out[n] = v
	}
	return out, nil
}
