// Attempts runs agents; an attempt's files, checkpoints restored, signals and the worker's secrets for runs.

package attempt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/subosito/gotenv"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/fleet/metrics"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/attach"
	"github.com/mlrb/mlrb/internal/sandbox/gateway"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// Attempts runs agents: one attempt of a run per RunAgent.
type Attempts struct {
	Sandbox *workspace.Sandbox
	// EnvFile holds worker-side secrets (KEY=value lines) that runs name;
	// SecretNames, when set, are the only names runs may ask for.
	EnvFile     string
	SecretNames []string
	// ControlsEvery paces the reads of a run's controls (0: PollEvery).
	ControlsEvery time.Duration
	// LLM is how agents' LLM calls go out (no Prices: not served).
	LLM  LLMGateway
	Host *host.Host
	Runs host.Runs
	// Client signals checkpoint commits to the run's workflow and
	// carries heartbeats.
	Client client.Client
	Logger *zap.Logger
	// Metrics records checkpoints and running attempts (nil: nothing is
	// recorded).
	Metrics *metrics.Metrics
	// Rooms are people's attempts on this host, for the attach server
	// (nil: people cannot attach here).
	Rooms *attach.Rooms
}

// live heartbeats an attempt (liveness).
func (a *Attempts) live(ctx context.Context, lease *activities.Lease) (context.Context, *host.Liveness, error) {
	return host.Pulse{Host: a.Host, Client: a.Client, Logger: a.Logger}.Live(ctx, lease)
}

func (a *Attempts) attempt(runID string, n int) *workspace.Attempt {
	return &workspace.Attempt{RunID: runID, N: n, Dir: filepath.Join(a.Host.WorkDir, "runs", workspace.RunKey(runID), fmt.Sprintf("attempt-%d", n)),
		Door: a.Host.DoorDir(runs.Holder{RunID: runID, N: n}.Token()), Allow: workspace.NewAllowance(&gateway.Allowance{MaxRefused: a.LLM.MaxRefused, MaxRefusedBytes: a.LLM.MaxRefusedBytes, MaxConns: a.LLM.MaxConns})}
}

// restoreLatest restores ref with restore, falling back to earlier
// checkpoints when a chunk is missing or corrupt; it returns the checkpoint
// restored.
func (a *Attempts) restoreLatest(ctx context.Context, runID string, ref *activities.CheckpointRef, restore func(*checkpoint.Manifest) error) (*checkpoint.Manifest, error) {
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

// secretValues looks up the named secrets in the worker's env file, and
// nowhere else: the worker's own environment holds its store, Temporal
// and cloud credentials. A name of the worker's own (MLRB_*, AWS_*,
// TEMPORAL_*) or one outside SecretNames (when set) is refused. Names
// travel through Temporal; values only from here to the agent.
func (a *Attempts) secretValues(names []string) (map[string]string, error) {
	refuse := func(format string, args ...any) error {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), activities.ErrBadTask, nil)
	}
	for _, n := range names {
		if err := contract.CheckSecretName(n); err != nil {
			return nil, refuse("secret %v", err)
		}
		// The provider keys stay on the worker, whatever they are called.
		if strings.EqualFold(n, a.LLM.OpenAI.KeyName) || strings.EqualFold(n, a.LLM.Anthropic.KeyName) {
			return nil, refuse("secret %s names a provider key (gateway.openai_key, gateway.anthropic_key): it stays on the worker; the gateway gives the agent a token", n)
		}
		if len(a.SecretNames) > 0 && !slices.Contains(a.SecretNames, n) {
			return nil, refuse("secret %s is not in this worker's agent.secret_names (%s)", n, strings.Join(a.SecretNames, ", "))
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	if a.EnvFile == "" {
		return nil, refuse("secret %s: this worker has no agent.env_file; secrets come only from there, never from the worker's environment", names[0])
	}
	if err := config.PrivateFile("agent.env_file", a.EnvFile); err != nil {
		return nil, refuse("%v", err)
	}
	file, err := gotenv.Read(a.EnvFile)
	if err != nil {
		return nil, refuse("agent.env_file %s: %s", a.EnvFile, envFileProblem(a.EnvFile))
	}
	out := map[string]string{}
	for _, n := range names {
		v, ok := file[n]
		if !ok || v == "" {
			return nil, refuse("secret %s is not in agent.env_file %s (secrets come only from there, never from the worker's environment)", n, a.EnvFile)
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

// spaceMargin is kept free beyond a restore's own bytes: logs, the
// agent's first writes, the filesystem's own overhead.
const spaceMargin = 1 << 30

// checkSpace refuses a restore of bytes the work dir's disk cannot hold.
func (a *Attempts) checkSpace(bytes int64) error {
	free, err := host.FreeBytes(a.Host.WorkDir)
	if err != nil {
		return nil // unknown: the restore itself will say
	}
	if need := bytes + spaceMargin; free < need {
		return temporal.NewApplicationError(fmt.Sprintf("host %s: %s has %.1f GiB free, the restore needs %.1f GiB", a.Host.HostID, a.Host.WorkDir, float64(free)/(1<<30), float64(need)/(1<<30)), activities.ErrNoSpace)
	}
	return nil
}
