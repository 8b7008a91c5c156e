// Workspace is where an attempt runs, chosen once when the worker is assembled (host.runtime).

package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// ErrUnfit: the task asks what this workspace cannot give.
var ErrUnfit = errors.New("the task does not fit this workspace")

// Workspace is where an attempt runs, chosen once when the worker is
// assembled (host.runtime): a directory on this host with the agent as a
// local process (DirWorkspace), or a container (ContainerWorkspace). Each
// owns what differs between the two: how a checkpoint is restored and
// taken, the paths the agent and the evaluator are told, mounts, limits
// and image digests. The activities hold one and never ask which.
//
// Neither re-attaches to a task left by a dead worker, as Nomad's
// RecoverTask does: a restarted worker reaps what its predecessor left and
// the run resumes the attempt from its last checkpoint. Re-attaching would
// save the minutes since that checkpoint, but it needs the dead worker's
// supervision state (deadlines, the checkpoint in flight, the log offset)
// and, for processes, a child that died with the worker (Pdeathsig). The
// checkpoint is one recovery path for every loss (worker, host, network),
// tested by every crash test, and what it costs is bounded by
// checkpoint.interval; a SIGTERMed worker hands its attempts back with a
// final checkpoint and loses nothing.
type Workspace interface {
	// Start and Reap run tasks and kill what a dead worker left.
	runtime.Runtime
	// Prepare makes the attempt's workspace on this host: checkpoint m
	// restored into it, or (m nil) a fresh one, seeded from the agent's
	// image (image; "": the workspace's own) where it has one. An error
	// that wraps ErrUnfit is the task's: trying again cannot mend it.
	Prepare(ctx context.Context, at *Attempt, image string, m *checkpoint.Manifest) error
	// AgentTask describes the agent's task: command (nil: the image's
	// own), image, mounts and limits; it fills in the paths env tells
	// the agent.
	AgentTask(at *Attempt, command []string, image string, env *contract.Env) runtime.TaskSpec
	// Snapshot checkpoints the attempt's workspace, its agent running or
	// stopped.
	Snapshot(ctx context.Context, at *Attempt, meta checkpoint.Meta, prev *checkpoint.Manifest) (*checkpoint.Manifest, error)
	// EvalTask describes an evaluator's task over a model and a results
	// dir on this host; image overrides the configured evaluator image.
	EvalTask(ev *EvalDirs, command []string, image string) runtime.TaskSpec
	// CheckTask describes the check of one output (item, a file of this
	// host named name) where it can reach nothing: no network, nothing
	// but the item mounted (tasks.Check); image as for EvalTask.
	CheckTask(ev *EvalDirs, item, name string, command []string, image string) runtime.TaskSpec
	// Digest is what an image really is, recorded as provenance; where
	// tasks are processes, the {self} binary's content hash. An error
	// means this workspace cannot run it.
	Digest(ctx context.Context, image string) (string, error)
	// ImageFiles calls each with every regular file of image whose size
	// want accepts (nothing where tasks are processes: no image).
	ImageFiles(ctx context.Context, image string, want func(size int64) bool, each func(name string, size int64, r io.Reader) error) error
	// Outside is what a running task writes outside its workspace's
	// directory (a container's writable layer), which its workspace
	// limit counts too; nil where there is nothing of the kind.
	Outside(spec runtime.TaskSpec) func(ctx context.Context) (bytes, entries int64, err error)
}

// Attempt is one agent attempt's files on this host.
type Attempt struct {
	RunID string
	N     int
	Dir   string // <work>/runs/<run>/attempt-<n>
	// Door holds the socket of the attempt's gateway (doorDir).
	Door string
	// Allow is the attempt's share of the worker.
	Allow *Allowance
	// State are the agent's declared state paths (its definition's
	// state_paths), checkpointed with its workspace.
	State []string
}

// doorSocket is a gateway socket's name in its door dir.
const doorSocket = "door.sock"

// Task is the attempt's runtime task name, deterministic from run and
// attempt.
func (at *Attempt) Task() string { return fmt.Sprintf("agent-%s-%d", RunKey(at.RunID), at.N) }

// Workdir is the agent's work dir on this host (a directory workspace).
func (at *Attempt) Workdir() string { return filepath.Join(at.Dir, "workspace") }

// Spec, Prompt and Log are files the worker writes for the agent.
func (at *Attempt) Spec() string   { return filepath.Join(at.Dir, "task.json") }
func (at *Attempt) Prompt() string { return filepath.Join(at.Dir, "prompt.md") }
func (at *Attempt) Log() string    { return filepath.Join(at.Dir, "agent.log") }

// Control holds what the worker rewrites while the agent runs (its
// deadline), outside the checkpointed workspace.
func (at *Attempt) Control() string { return filepath.Join(at.Dir, "control") }

// Root holds a container's checkpointed paths on this host (root/app for
// /app), mounted into the container.
func (at *Attempt) Root() string { return filepath.Join(at.Dir, "root") }

// Labels tie the attempt's task to its run and attempt, for fencing.
func (at *Attempt) Labels(token, task string) map[string]string {
	return map[string]string{runtime.LabelRun: at.RunID, runtime.LabelAttempt: strconv.Itoa(at.N), runtime.LabelToken: token, runtime.LabelTask: task}
}

// EvalDirs are one evaluation's files on this host.
type EvalDirs struct {
	Name    string // the runtime task name
	Dir     string
	Model   string // the model dir found in the restored checkpoint
	Results string
	// ResultsName is the results file the evaluator is told to write
	// ({results}) and the one the worker reads: chosen per evaluation.
	ResultsName string
	// DevResultsName, when set, is the dev split's results file
	// ({dev_results}) of a run that scores both splits (dev_args).
	DevResultsName string
	// Outputs holds what the evaluator leaves for Check.
	Outputs string
	// Door holds the socket of the evaluator's gateway (doorDir), when
	// its task gives it the network.
	Door    string
	Network bool
	Spec    string
	Task    string
	Seed    int64
	// Data are the task's data sets as this host holds them, checked.
	Data []DataSet
	// ShippedModel, when set, is a model the evaluator holds itself (a
	// task's control, in its image) at this path, read in place of model.
	ShippedModel string
}

// DataSet is one of a task's evaluation data sets, given to its
// evaluator read-only: its name ({data:<name>}), where this host holds
// it, and the SHA-256 it was checked against (the result records it).
type DataSet struct{ Name, Path, SHA256 string }

// ResultsName is a results file name nobody can know before the
// evaluation starts.
func ResultsName() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "results_mlrb_" + hex.EncodeToString(b[:]) + ".json"
}

func (e *EvalDirs) Log() string { return filepath.Join(e.Dir, "evaluator.log") }

// Expand fills a command template's {name} placeholders.
func Expand(tmpl []string, vars map[string]string) []string {
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

// evalVars are the placeholders of a task's evaluation command, given
// where the evaluator sees the model, results and outputs dirs.
func evalVars(self, model, output, outputs string, ev *EvalDirs) map[string]string {
	vars := map[string]string{"self": self, "model": model, "output": output, "results": path.Join(filepath.ToSlash(output), ev.ResultsName),
		"outputs": outputs, "task": ev.Task, "seed": strconv.FormatInt(ev.Seed, 10)}
	if ev.DevResultsName != "" {
		vars["dev_results"] = path.Join(filepath.ToSlash(output), ev.DevResultsName)
	}
	for _, d := range ev.Data {
		vars["data:"+d.Name] = d.Path
	}
	return vars
}
