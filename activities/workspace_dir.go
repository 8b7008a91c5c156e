package activities

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/contract"
	"github.com/mlrb/mlrb/internal/runtime"
)

// DirWorkspace runs agents and evaluators as local processes; the agent
// works in a directory of this host, told by its real paths.
type DirWorkspace struct {
	*runtime.Process
	Engine *checkpoint.Engine
	// Self is the mlrb binary; it runs the reference agent and evaluator.
	Self string
}

// Prepare restores m into the attempt's work dir, or makes it empty.
func (w *DirWorkspace) Prepare(ctx context.Context, at *attempt, _ string, m *checkpoint.Manifest) error {
	if err := os.RemoveAll(at.Workdir()); err != nil {
		return err
	}
	if m != nil {
		if err := w.Engine.Restore(ctx, m, at.Workdir()); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(at.Workdir(), contract.OutputDir), 0o755)
}

// AgentTask runs the agent command in the work dir.
func (w *DirWorkspace) AgentTask(at *attempt, command []string, _ string, env *contract.Env) runtime.TaskSpec {
	env.Workdir, env.TaskSpec, env.PromptFile = at.Workdir(), at.Spec(), at.Prompt()
	env.DeadlineFile = filepath.Join(at.Control(), contract.DeadlineFile)
	return runtime.TaskSpec{Name: at.Task(), Command: expand(command, map[string]string{"self": w.Self}), Dir: at.Workdir(), LogPath: at.Log()}
}

// Snapshot checkpoints the work dir.
func (w *DirWorkspace) Snapshot(ctx context.Context, at *attempt, meta checkpoint.Meta, prev *checkpoint.Manifest) (*checkpoint.Manifest, error) {
	return w.Engine.Save(ctx, at.Workdir(), meta, prev)
}

// EvalTask runs the evaluator on the host's paths.
func (w *DirWorkspace) EvalTask(ev *evalDirs, command []string, _ string) runtime.TaskSpec {
	run := filepath.Join(ev.dir, "run")
	return runtime.TaskSpec{Name: ev.name, Dir: run, LogPath: ev.Log(),
		Command: expand(command, evalVars(w.Self, ev.model, ev.results, ev)),
		Env:     map[string]string{contract.EnvTaskSpec: ev.spec, contract.EnvTask: ev.task}}
}

// Digest: processes run no image.
func (w *DirWorkspace) Digest(_ context.Context, image string) (string, error) {
	if image != "" {
		return "", errors.New("this worker runs agents as processes; an agent image needs host.runtime docker")
	}
	return "", nil
}
