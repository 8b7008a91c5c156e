package activities

import (
	"context"
	"os"
	"path"
	"strings"

	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/contract"
	"github.com/mlrb/mlrb/internal/runtime"
)

// Paths inside the containers.
const (
	containerRunDir     = "/mlrb-run"
	containerControlDir = "/mlrb-control"
	containerModel      = "/model"
	containerResults    = "/results"
)

// ContainerWorkspace runs agents and evaluators as Docker containers. The
// agent's paths (Paths) live in its container; they are checkpointed
// through Docker's archive API and restored by copying a verified tree in
// before the container starts.
type ContainerWorkspace struct {
	Docker *runtime.Docker
	Engine *checkpoint.Engine
	// AgentImage runs the built-in agents; EvalImage the evaluators,
	// unless a task or a retry names another.
	AgentImage, EvalImage string
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

// Start starts a task; a restored tree is copied in first and its staging
// dir freed once the container has it.
func (w *ContainerWorkspace) Start(ctx context.Context, spec runtime.TaskSpec) (runtime.Handle, error) {
	h, err := w.Docker.Start(ctx, spec)
	if spec.RestoreDir != "" {
		_ = os.RemoveAll(spec.RestoreDir)
	}
	return h, err
}

// Reap removes every container an earlier worker of this host left.
func (w *ContainerWorkspace) Reap(ctx context.Context) (int, error) { return w.Docker.Reap(ctx) }

// Restore restores m into a staging dir, every chunk verified, so that a
// damaged checkpoint falls back before any container exists.
func (w *ContainerWorkspace) Restore(ctx context.Context, m *checkpoint.Manifest, at *attempt) error {
	if err := os.RemoveAll(at.Staging()); err != nil {
		return err
	}
	return w.Engine.Restore(ctx, m, at.Staging())
}

// AgentTask runs the agent in a container: the built-in agents from the
// agent image, an MLRB agent image with its own command; the task spec,
// prompt and control dir are mounted read-only.
func (w *ContainerWorkspace) AgentTask(at *attempt, command []string, image string, env *contract.Env) runtime.TaskSpec {
	spec, prompt := path.Join(containerRunDir, "task.json"), path.Join(containerRunDir, "prompt.md")
	env.Workdir, env.TaskSpec, env.PromptFile = w.Workdir, spec, prompt
	env.DeadlineFile = path.Join(containerControlDir, contract.DeadlineFile)
	t := runtime.TaskSpec{Name: at.Task(), Command: expand(command, map[string]string{"self": w.Self}), LogPath: at.Log(),
		Image: w.AgentImage, Dir: "/",
		// The control dir, not its file, is mounted: a rewrite replaces
		// the file, which a file mount would not follow.
		Binds: []string{at.Spec() + ":" + spec + ":ro", at.Prompt() + ":" + prompt + ":ro", at.Control() + ":" + containerControlDir + ":ro"}}
	if image != "" {
		t.Image, t.Dir = image, "" // the image's own working dir
	}
	if _, err := os.Stat(at.Staging()); err == nil {
		t.RestoreDir = at.Staging()
	}
	w.limit(&t)
	return t
}

// Snapshot reads the container's paths through the archive API.
func (w *ContainerWorkspace) Snapshot(ctx context.Context, at *attempt, meta checkpoint.Meta, prev *checkpoint.Manifest) (*checkpoint.Manifest, error) {
	archives, err := w.Docker.Archives(ctx, at.Task(), w.Paths)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, ar := range archives {
			_ = ar.Body.Close()
		}
	}()
	srcs := make([]checkpoint.TarSource, len(archives))
	for i, ar := range archives {
		srcs[i] = checkpoint.TarSource{Prefix: ar.Prefix, R: ar.Body}
	}
	meta.Workdir = strings.TrimPrefix(w.Workdir, "/")
	return w.Engine.SaveTar(ctx, srcs, meta, prev)
}

// EvalTask runs the evaluator in a fresh container that never shared a
// filesystem with the agent: the model read-only, the results writable,
// nothing else.
func (w *ContainerWorkspace) EvalTask(ev *evalDirs, command []string, image string) runtime.TaskSpec {
	spec := path.Join(containerRunDir, "task.json")
	t := runtime.TaskSpec{Name: ev.name, LogPath: ev.Log(), Image: w.EvalImage, Dir: "/",
		Command: expand(command, evalVars(w.Self, containerModel, containerResults, ev)),
		Env:     map[string]string{contract.EnvTaskSpec: spec, contract.EnvTask: ev.task},
		Binds:   []string{ev.model + ":" + containerModel + ":ro", ev.results + ":" + containerResults, ev.spec + ":" + spec + ":ro"}}
	if image != "" {
		t.Image = image
	}
	w.limit(&t)
	return t
}

func (w *ContainerWorkspace) limit(t *runtime.TaskSpec) {
	t.MemoryBytes, t.CPUs, t.PidsLimit = w.MemoryBytes, w.CPUs, w.PidsLimit
}

// Digest is the image's content digest.
func (w *ContainerWorkspace) Digest(ctx context.Context, image string) (string, error) {
	return w.Docker.ImageDigest(ctx, image)
}
