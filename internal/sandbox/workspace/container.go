// ContainerWorkspace: attempts and evaluations in Docker containers.

package workspace

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

// Paths inside the containers.
const (
	containerRunDir     = "/mlrb-run"
	containerControlDir = "/mlrb-control"
	containerModel      = "/model"
	containerResults    = "/results"
	containerOutputs    = "/outputs"
	containerItem       = "/item"
	// containerData holds an evaluation's data sets, each at its name.
	containerData = "/data"
)

// ContainerWorkspace runs agents and evaluators as Docker containers. The
// agent's checkpointed paths (Paths: /app, the Hugging Face cache) live on
// this host's disk, seeded once from the image and mounted into the
// container: a checkpoint reads them as plain files, so its cost follows
// what changed (unchanged files are skipped unread, files still being
// written are never committed torn, hardlinks and symlinks are kept), not
// the size of the workspace, and nothing streams through the daemon.
type ContainerWorkspace struct {
	// Docker starts and reaps the containers.
	*runtime.Docker
	Engine *checkpoint.Engine
	// BuiltinImage runs the built-in agents; EvalImage the evaluators,
	// unless a task or a retry names another.
	BuiltinImage, EvalImage string
	// Paths are checkpointed out of the agent's container.
	Paths []string
	// Workdir is MLRB_WORKDIR inside the container.
	Workdir string
	// Self is the mlrb binary inside the images.
	Self        string
	MemoryBytes int64
	CPUs        float64
	PidsLimit   int64
	// User runs agents and evaluators as uid[:gid] ("": the image's).
	User string
}

// Prepare restores m's paths onto this host's disk, every chunk verified
// (a damaged checkpoint falls back before any container exists), or seeds
// them from the image on a fresh start.
func (w *ContainerWorkspace) Prepare(ctx context.Context, at *Attempt, image string, m *checkpoint.Manifest) error {
	if err := os.RemoveAll(at.Root()); err != nil {
		return err
	}
	var err error
	if m != nil {
		if err = stateRestored(m, at.State); err != nil {
			return err
		}
		err = w.Engine.Restore(ctx, m, at.Root())
	} else {
		if image == "" {
			image = w.BuiltinImage
		}
		err = w.Docker.Seed(ctx, image, w.paths(at), at.Root())
	}
	if err != nil {
		return err
	}
	return w.mkdirs(at)
}

// paths are the attempt's checkpointed paths: the worker's and the
// agent's declared state paths.
func (w *ContainerWorkspace) paths(at *Attempt) []string {
	out := slices.Clone(w.Paths)
	for _, p := range at.State {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// stateRestored: a checkpoint holds each declared state path, so the
// agent's memory comes back whole; one that does not (taken before the
// path was declared) is refused, as the infrastructure's failure, never
// restored to an agent that would go on without its memory.
func stateRestored(m *checkpoint.Manifest, state []string) error {
	for _, p := range state {
		rel := strings.TrimPrefix(path.Clean(p), "/")
		if !slices.ContainsFunc(m.Files, func(f checkpoint.File) bool { return f.Path == rel }) {
			return fmt.Errorf("checkpoint #%d holds no %s, one of the agent's state_paths: its memory would not come back whole", m.Seq, p)
		}
	}
	return nil
}

// mkdirs makes what every mount needs, its source, and the agent its
// output dir, under the restored root. The tree is the agent's: a link it
// left (/app/work -> /etc) is refused, never followed to make directories
// on the host.
func (w *ContainerWorkspace) mkdirs(at *Attempt) error {
	dir := at.Root()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := safefs.OpenDir(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	dirs := append(w.paths(at), path.Join(w.Workdir, contract.OutputDir))
	if h := w.home(); h != "" {
		dirs = append(dirs, h)
	}
	for _, p := range dirs {
		d, err := root.MkdirAll(strings.TrimPrefix(path.Clean(p), "/"), 0o755)
		if err != nil {
			return fmt.Errorf("workspace %s: %w", p, err)
		}
		_ = d.Close()
	}
	return nil
}

// home is a non-root agent's home: in its first checkpointed path (the
// image's is root's, which it cannot write); "" when it runs as the
// image's user.
func (w *ContainerWorkspace) home() string {
	if w.User == "" || len(w.Paths) == 0 {
		return ""
	}
	return path.Join(w.Paths[0], ".home")
}

// onHost is a container path's place on this host.
func (w *ContainerWorkspace) onHost(at *Attempt, p string) string {
	return filepath.Join(at.Root(), filepath.FromSlash(strings.TrimPrefix(path.Clean(p), "/")))
}

// AgentTask runs the agent in a container: the built-in agents from the
// agent image, an MLRB agent image with its own command; the task spec,
// prompt and control dir are mounted read-only.
func (w *ContainerWorkspace) AgentTask(at *Attempt, command []string, image string, env *contract.Env) runtime.TaskSpec {
	spec, prompt := path.Join(containerRunDir, "task.json"), path.Join(containerRunDir, "prompt.md")
	env.Workdir, env.TaskSpec, env.PromptFile = w.Workdir, spec, prompt
	env.DeadlineFile = path.Join(containerControlDir, contract.DeadlineFile)
	if env.Resumed {
		env.ResumeFile = path.Join(containerControlDir, contract.ResumeFile)
	}
	t := runtime.TaskSpec{Name: at.Task(), Command: Expand(command, map[string]string{"self": w.Self}), LogPath: at.Log(),
		Image: w.BuiltinImage, Dir: "/",
		// The control dir, not its file, is mounted: a rewrite replaces
		// the file, which a file mount would not follow.
		Binds: []string{at.Spec() + ":" + spec + ":ro", at.Prompt() + ":" + prompt + ":ro", at.Control() + ":" + containerControlDir + ":ro"}}
	for _, p := range w.paths(at) {
		t.Binds = append(t.Binds, w.onHost(at, p)+":"+p)
	}
	if image != "" {
		t.Image, t.Dir = image, "" // the image's own working dir
	}
	w.door(at.Door, &t)
	w.limit(&t)
	if h := w.home(); h != "" {
		// A user the image does not know has HOME=/: pip, caches and the
		// Hugging Face hub write under a home of its own, checkpointed.
		t.Env["HOME"] = h
		for _, p := range w.Paths {
			if strings.HasSuffix(p, "/.cache/huggingface") {
				t.Env["HF_HOME"] = p
			}
		}
	}
	return t
}

// Where an agent's door listens, in the network it shares with it.
const DoorAddr = "127.0.0.1:3128"

// door gives a container its one way out: it shares the network of a
// relay container (the agent image's mlrb binary: `door`) that has
// nothing but loopback and carries each connection to the worker's
// gateway socket in dir. The task is told the door as its HTTP(S) proxy.
// Agents and evaluators (which load what an agent made) get one each.
func (w *ContainerWorkspace) door(dir string, t *runtime.TaskSpec) {
	t.Door = &runtime.Door{Image: w.BuiltinImage, Binds: []string{dir + ":/door"}, Ready: filepath.Join(dir, "ready"),
		Command: []string{w.Self, "door", "--listen", DoorAddr, "--socket", "/door/door.sock", "--ready", "/door/ready"}}
	if t.Env == nil {
		t.Env = map[string]string{}
	}
	proxy(t.Env, "http://"+DoorAddr)
}

// proxy tells a task its gateway is its HTTP(S) proxy.
func proxy(env map[string]string, url string) {
	for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
		env[k] = url
	}
}

// Snapshot reads the container's paths where they live, on this host.
func (w *ContainerWorkspace) Snapshot(ctx context.Context, at *Attempt, meta checkpoint.Meta, prev *checkpoint.Manifest) (*checkpoint.Manifest, error) {
	meta.Workdir = strings.TrimPrefix(path.Clean(w.Workdir), "/")
	return w.Engine.Save(ctx, at.Root(), meta, prev)
}

// EvalTask runs the evaluator in a fresh container that never shared a
// filesystem with the agent: the model read-only, the results writable,
// nothing else; its network is a door as an agent's (it fetches datasets
// from the hub, and loads what an agent made).
func (w *ContainerWorkspace) EvalTask(ev *EvalDirs, command []string, image string) runtime.TaskSpec {
	spec := path.Join(containerRunDir, "task.json")
	vars := evalVars(w.Self, containerModel, containerResults, containerOutputs, ev)
	binds := []string{ev.Results + ":" + containerResults, ev.Outputs + ":" + containerOutputs, ev.Spec + ":" + spec + ":ro"}
	if ev.ShippedModel != "" {
		vars["model"] = ev.ShippedModel
	} else {
		binds = append(binds, ev.Model+":"+containerModel+":ro")
	}
	for _, d := range ev.Data {
		// Each data set read-only at /data/<name>.
		in := path.Join(containerData, d.Name)
		vars["data:"+d.Name] = in
		binds = append(binds, d.Path+":"+in+":ro")
	}
	t := runtime.TaskSpec{Name: ev.Name, LogPath: ev.Log(), Image: w.EvalImage, Dir: "/",
		Command: Expand(command, vars),
		Env:     map[string]string{contract.EnvTaskSpec: spec, contract.EnvTask: ev.Task},
		Binds:   binds}
	if image != "" {
		t.Image = image
	}
	if ev.Network {
		w.door(ev.Door, &t)
	} else {
		t.Network = runtime.NetworkNone
	}
	w.limit(&t)
	return t
}

// CheckTask runs a check with no network and one mount, the output
// read-only: whatever the output makes the checker run reaches neither
// the results nor anything else, and its verdict is the exit status.
func (w *ContainerWorkspace) CheckTask(ev *EvalDirs, item, name string, command []string, image string) runtime.TaskSpec {
	in := path.Join(containerItem, name)
	t := runtime.TaskSpec{LogPath: ev.Log(), Image: w.EvalImage, Dir: "/", Network: runtime.NetworkNone,
		Command: Expand(command, map[string]string{"item": in, "task": ev.Task, "self": w.Self}),
		Binds:   []string{item + ":" + in + ":ro"}}
	if image != "" {
		t.Image = image
	}
	w.limit(&t)
	return t
}

func (w *ContainerWorkspace) limit(t *runtime.TaskSpec) {
	t.MemoryBytes, t.CPUs, t.PidsLimit, t.User = w.MemoryBytes, w.CPUs, w.PidsLimit, w.User
}

// Outside is the container's writable layer: what the agent wrote to
// the image's own paths (/var/tmp, site-packages), on the host's disk.
// A layer on this host is walked as a workspace is (an empty file is an
// inode of the host's disk: it counts as an entry and minEntryBytes);
// otherwise the daemon's size is asked, within layerTimeout (the daemon
// walks the layer, for minutes when it holds millions of files).
func (w *ContainerWorkspace) Outside(spec runtime.TaskSpec) func(context.Context) (int64, int64, error) {
	return func(ctx context.Context) (int64, int64, error) {
		dir, err := w.Docker.LayerDir(ctx, spec.Name)
		if err != nil {
			return 0, 0, err
		}
		if dir != "" {
			return diskUsage(dir)
		}
		ctx, cancel := context.WithTimeout(ctx, layerTimeout)
		defer cancel()
		n, err := w.Docker.LayerSize(ctx, spec.Name)
		return n, 0, err
	}
}

// Digest is the image's content digest.
func (w *ContainerWorkspace) Digest(ctx context.Context, image string) (string, error) {
	return w.Docker.ImageDigest(ctx, image)
}
