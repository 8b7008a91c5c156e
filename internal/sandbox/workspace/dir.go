// DirWorkspace runs agents and evaluators as local processes.

package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/safefs"
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
func (w *DirWorkspace) Prepare(ctx context.Context, at *Attempt, _ string, m *checkpoint.Manifest) error {
	if len(at.State) > 0 {
		return fmt.Errorf("%w: state_paths %v: a process agent has no filesystem but its work dir; run it under host.runtime docker", ErrUnfit, at.State)
	}
	if err := os.RemoveAll(at.Workdir()); err != nil {
		return err
	}
	if m != nil {
		if err := w.Engine.Restore(ctx, m, at.Workdir()); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(at.Workdir(), 0o755); err != nil {
		return err
	}
	// The restored tree is the agent's: a link it left is refused, never
	// followed to make a directory elsewhere.
	root, err := safefs.OpenDir(at.Workdir())
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	d, err := root.MkdirAll(contract.OutputDir, 0o755)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	return d.Close()
}

// AgentTask runs the agent command in the work dir.
func (w *DirWorkspace) AgentTask(at *Attempt, command []string, _ string, env *contract.Env) runtime.TaskSpec {
	env.Workdir, env.TaskSpec, env.PromptFile = at.Workdir(), at.Spec(), at.Prompt()
	env.DeadlineFile = filepath.Join(at.Control(), contract.DeadlineFile)
	if env.Resumed {
		env.ResumeFile = filepath.Join(at.Control(), contract.ResumeFile)
	}
	return runtime.TaskSpec{Name: at.Task(), Command: Expand(command, map[string]string{"self": w.Self}), Dir: at.Workdir(), LogPath: at.Log()}
}

// Snapshot checkpoints the work dir.
func (w *DirWorkspace) Snapshot(ctx context.Context, at *Attempt, meta checkpoint.Meta, prev *checkpoint.Manifest) (*checkpoint.Manifest, error) {
	return w.Engine.Save(ctx, at.Workdir(), meta, prev)
}

// EvalTask runs the evaluator on the host's paths.
func (w *DirWorkspace) EvalTask(ev *EvalDirs, command []string, _ string) runtime.TaskSpec {
	run := filepath.Join(ev.Dir, "run")
	model := ev.Model
	if ev.ShippedModel != "" {
		// Where a host running evaluators as processes installs it, as
		// the evaluator's image does.
		model = ev.ShippedModel
	}
	return runtime.TaskSpec{Name: ev.Name, Dir: run, LogPath: ev.Log(),
		Command: Expand(command, evalVars(w.Self, model, ev.Results, ev.Outputs, ev)),
		Env:     map[string]string{contract.EnvTaskSpec: ev.Spec, contract.EnvTask: ev.Task}}
}

// CheckTask runs a check as a process on the item where it lies. A
// process is not sandboxed: checks that run what a model wrote (Lean's
// meta code) belong under host.runtime docker.
func (w *DirWorkspace) CheckTask(ev *EvalDirs, item, _ string, command []string, _ string) runtime.TaskSpec {
	return runtime.TaskSpec{Dir: filepath.Dir(item), LogPath: ev.Log(),
		Command: Expand(command, map[string]string{"item": item, "task": ev.Task, "self": w.Self})}
}

// Digest: processes run no image.
// Outside is nil: a process writes nowhere the attempt's directory does
// not hold that the worker could measure.
func (w *DirWorkspace) Outside(runtime.TaskSpec) func(context.Context) (int64, int64, error) {
	return nil
}

// ImageFiles finds none: a process runs no image.
func (w *DirWorkspace) ImageFiles(context.Context, string, func(int64) bool, func(string, int64, io.Reader) error) error {
	return nil
}

func (w *DirWorkspace) Digest(_ context.Context, image string) (string, error) {
	if image != "" {
		return "", errors.New("this worker runs agents as processes; an agent image needs host.runtime docker")
	}
	return fileDigest(w.Self)
}

// fileDigest names a process task's binary by its content (the built-in
// agents and the reference evaluator run from {self}), so that a result
// or an anchor says which build ran it; hashed once per path.
func fileDigest(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	if d, ok := digests.Load(path); ok {
		return d.(string), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("digest of %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("digest of %s: %w", path, err)
	}
	d := "process " + filepath.Base(path) + " sha256:" + hex.EncodeToString(h.Sum(nil))
	digests.Store(path, d)
	return d, nil
}

var digests sync.Map // binary path -> its digest
