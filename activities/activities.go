// The shared sandbox of agents and evaluators, ResolveTask, and the worker's secrets for runs.

package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/scoring/evaldata"

	"github.com/subosito/gotenv"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/fleet/gpu"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/gateway"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// Sandbox is how agents and evaluators run, and what bounds them.
type Sandbox struct {
	// Workspace is where attempts and evaluations run (processes or
	// containers), chosen once when the worker is assembled.
	Workspace Workspace
	// EnvFile holds worker-side secrets (KEY=value lines) that runs name;
	// SecretNames, when set, are the only names runs may ask for.
	EnvFile     string
	SecretNames []string
	// WorkspaceLimit bounds an attempt's workspace on disk, in bytes (0:
	// none): an agent that outgrows it fails the run, naming the limit.
	WorkspaceLimit int64
	// WorkspaceEntries bounds its entries (0: no limit).
	WorkspaceEntries int64
	// LogLimit bounds what is kept of an agent's or evaluator's output,
	// in bytes (0: none).
	LogLimit int64
	// Egress is where an agent's door lets it connect (gateway.allow, and
	// never anything of ours).
	Egress *gateway.Policy
	// LLM is how agents' LLM calls go out (no Prices: not served).
	LLM LLMGateway
	// Data is where the data sets tasks' evaluators read lie
	// (eval.data_dir; nil: none here).
	Data   *evaldata.Dir
	Logger *zap.Logger
}

// ResolveTask loads the spec from this worker's catalog and hashes it.
func (a *Tasks) ResolveTask(ctx context.Context, in ResolveInput) (*ResolvedTask, error) {
	spec, err := a.Catalog.Get(in.Task)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadTask, nil)
	}
	def := agents.Of(in.AgentDef, in.Agent, in.Image, "")
	if err := def.CheckTask(spec.ID, spec.Suite == "mini"); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadTask, nil)
	}
	if _, err := a.Data.Check(spec); err != nil {
		// The operator's setup, refused before a GPU is leased.
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadTask, nil)
	}
	res := &ResolvedTask{Spec: *spec, Hash: spec.Hash(), Store: a.Store.String()}
	if def.Image != "" {
		image := def.Image
		if in.Image != "" {
			image = in.Image // pinned when its benchmark started
		}
		d, err := a.Images.Digest(ctx, image)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("agent %s: %v", def.Name, err), ErrBadTask, nil)
		}
		res.AgentImage = d
	}
	return res, nil
}

// ResolveAgents pins each image agent's image to its digest, when a
// benchmark starts: its runs, started over hours or days, all run the
// image its agents were resolved to, wherever their tags move meanwhile.
// An image this worker cannot find is a bad input, named with its agent.
func (a *Tasks) ResolveAgents(ctx context.Context, defs []agents.Definition) (map[string]string, error) {
	out := map[string]string{}
	for _, d := range defs {
		if d.Image == "" {
			continue
		}
		digest, err := a.Images.Digest(ctx, d.Image)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("agent %s: image %s: %v (build or load it on the workers)", d.Name, d.Image, err), ErrBadTask, nil)
		}
		out[d.Name] = digest
	}
	return out, nil
}

// LoadCheckpoint describes a committed checkpoint of a run, for a fork or
// a continued run.
func (a *Records) LoadCheckpoint(ctx context.Context, src CheckpointSource) (*CheckpointRef, error) {
	var m *checkpoint.Manifest
	var err error
	if src.Seq == 0 {
		m, err = a.Engine.Latest(ctx, src.RunID)
	} else {
		m, err = a.Engine.Load(ctx, src.RunID, src.Seq)
	}
	last, ferr := a.Engine.LastAttempt(ctx, src.RunID)
	if ferr != nil {
		return nil, fmt.Errorf("checkpoint of %s: %w", src.RunID, ferr)
	}
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint) && src.IfAny && last > 0:
		return &CheckpointRef{LastAttempt: last}, nil
	case errors.Is(err, checkpoint.ErrNoCheckpoint) && src.IfAny:
		return nil, nil
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadTask, err)
	case err != nil:
		return nil, fmt.Errorf("checkpoint of %s: %w", src.RunID, err) // the store may be back on the next try
	}
	return &CheckpointRef{RunID: src.RunID, Seq: m.Seq, Attempt: m.Attempt, AgentSeconds: m.AgentSeconds, At: m.CreatedAt, Files: len(m.Files), Bytes: m.Bytes,
		Final: m.Final, Ending: m.Ending, LastAttempt: last}, nil
}

// AcquireLease takes a GPU slot on this host for one attempt and names
// the host queue the attempt must run on.
func (a *Leases) AcquireLease(ctx context.Context, req LeaseRequest) (*Lease, error) {
	token := runs.Holder{RunID: req.RunID, Role: req.Role, N: req.Attempt}.Token()
	if req.GPUCount > 0 && a.GPUType != "" && req.GPUType != "" && req.GPUType != a.GPUType {
		return nil, temporal.NewApplicationError(fmt.Sprintf("host %s has %s GPUs, the task needs %s", a.HostID, a.GPUType, req.GPUType), ErrNoCapacity)
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
		return nil, temporal.NewApplicationError(fmt.Sprintf("host %s: %v", a.HostID, err), ErrNoCapacity)
	}
	if err != nil {
		return nil, fmt.Errorf("lease on %s: %w", a.HostID, err)
	}
	return &Lease{HostID: a.HostID, HostQueue: a.HostQueue, Devices: devs, Token: token}, nil
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
func (a *Leases) ReleaseLease(_ context.Context, l Lease) error {
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

func runKey(runID string) string { return url.PathEscape(runID) }

func (a *Attempts) attempt(runID string, n int) *attempt {
	return &attempt{runID: runID, n: n, dir: filepath.Join(a.Host.WorkDir, "runs", runKey(runID), fmt.Sprintf("attempt-%d", n)),
		door: a.Host.doorDir(runs.Holder{RunID: runID, N: n}.Token()), allow: newAllowance(a.Sandbox.LLM)}
}

// doorDir holds the gateway socket of one task (an attempt, an
// evaluation), mounted into its door container: <work>/doors/<hash>,
// short for a unix socket's 107-byte path limit whatever the run id.
func (h *Host) doorDir(task string) string {
	sum := sha256.Sum256([]byte(task))
	return filepath.Join(h.WorkDir, "doors", hex.EncodeToString(sum[:8]))
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
func (a *Attempts) restoreLatest(ctx context.Context, runID string, ref *CheckpointRef, restore func(*checkpoint.Manifest) error) (*checkpoint.Manifest, error) {
	for seq := ref.Seq; seq >= 1; seq-- {
		m, err := a.Runs.Engine.Load(ctx, runID, seq)
		if err == nil && seq == ref.Seq && ref.Attempt != 0 && m.Attempt != ref.Attempt {
			// Not the checkpoint the run accepted: another attempt's
			// under the same number (a store without conditional writes).
			err = fmt.Errorf("checkpoint #%d is attempt %d's, the run accepted attempt %d's", seq, m.Attempt, ref.Attempt)
		}
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

// signaller delivers signals to the activity's own workflow execution.
func (a *Attempts) signaller(ctx context.Context) func(context.Context, string, any) error {
	info := activity.GetInfo(ctx)
	wid, rid := info.WorkflowExecution.ID, info.WorkflowExecution.RunID
	return func(sctx context.Context, name string, arg any) error {
		return a.Client.SignalWorkflow(sctx, wid, rid, name, arg)
	}
}

// digest records which image really ran: the digest, not the tag ("" for
// processes; the tag when the digest cannot be read).
func (s *Sandbox) digest(ctx context.Context, image string) string {
	d, err := s.Workspace.Digest(ctx, image)
	if err != nil {
		s.Logger.Warn("image digest", zap.String("image", image), zap.Error(err))
		return image
	}
	return d
}

// secretValues looks up the named secrets in the worker's env file, and
// nowhere else: the worker's own environment holds its store, Temporal
// and cloud credentials. A name of the worker's own (MLRB_*, AWS_*,
// TEMPORAL_*) or one outside SecretNames (when set) is refused. Names
// travel through Temporal; values only from here to the agent.
func (a *Attempts) secretValues(names []string) (map[string]string, error) {
	refuse := func(format string, args ...any) error {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrBadTask, nil)
	}
	for _, n := range names {
		if err := contract.CheckSecretName(n); err != nil {
			return nil, refuse("secret %v", err)
		}
		// The provider keys stay on the worker, whatever they are called.
		if strings.EqualFold(n, a.Sandbox.LLM.OpenAI.KeyName) || strings.EqualFold(n, a.Sandbox.LLM.Anthropic.KeyName) {
			return nil, refuse("secret %s names a provider key (gateway.openai_key, gateway.anthropic_key): it stays on the worker; the gateway gives the agent a token", n)
		}
		if len(a.Sandbox.SecretNames) > 0 && !slices.Contains(a.Sandbox.SecretNames, n) {
			return nil, refuse("secret %s is not in this worker's agent.secret_names (%s)", n, strings.Join(a.Sandbox.SecretNames, ", "))
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	if a.Sandbox.EnvFile == "" {
		return nil, refuse("secret %s: this worker has no agent.env_file; secrets come only from there, never from the worker's environment", names[0])
	}
	if err := config.PrivateFile("agent.env_file", a.Sandbox.EnvFile); err != nil {
		return nil, refuse("%v", err)
	}
	file, err := gotenv.Read(a.Sandbox.EnvFile)
	if err != nil {
		return nil, refuse("agent.env_file %s: %s", a.Sandbox.EnvFile, envFileProblem(a.Sandbox.EnvFile))
	}
	out := map[string]string{}
	for _, n := range names {
		v, ok := file[n]
		if !ok || v == "" {
			return nil, refuse("secret %s is not in agent.env_file %s (secrets come only from there, never from the worker's environment)", n, a.Sandbox.EnvFile)
		}
		out[n] = v
	}
	return out, nil
}

// envFileProblem says what is wrong with an env file by line number,
// never by its text: the line may hold a secret.
func envFileProblem(path string) string {
	b, rerr := os.ReadFile(path)
	if rerr != nil {
		var pe *os.PathError
		if errors.As(rerr, &pe) {
			return pe.Err.Error()
		}
		return "unreadable"
	}
	for i, line := range strings.Split(string(b), "\n") {
		if _, perr := gotenv.StrictParse(strings.NewReader(line)); perr != nil {
			return fmt.Sprintf("line %d is not KEY=value (its text is not shown: it may hold a secret)", i+1)
		}
	}
	return "not KEY=value lines"
}

// ErrNoSpace: the host's disk cannot hold what an attempt must restore;
// the attempt is an infra loss and the run leases again.
const ErrNoSpace = "NoSpace"

// spaceMargin is kept free beyond a restore's own bytes: logs, the
// agent's first writes, the filesystem's own overhead.
const spaceMargin = 1 << 30

// checkSpace refuses a restore of bytes the work dir's disk cannot hold.
func (a *Attempts) checkSpace(bytes int64) error {
	free, err := freeBytes(a.Host.WorkDir)
	if err != nil {
		return nil // unknown: the restore itself will say
	}
	if need := bytes + spaceMargin; free < need {
		return temporal.NewApplicationError(fmt.Sprintf("host %s: %s has %.1f GiB free, the restore needs %.1f GiB", a.Host.HostID, a.Host.WorkDir, gib(free), gib(need)), ErrNoSpace)
	}
	return nil
}

// freeBytes is the space left to an unprivileged writer under dir.
func freeBytes(dir string) (int64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}
