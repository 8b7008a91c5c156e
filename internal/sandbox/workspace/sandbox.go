// Sandbox: what keeps a task to itself beyond the runtime's limits: its one door out, its output and memory bounds.

package workspace

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/sandbox/gateway"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/tasks"
)

// What keeps an agent's or an evaluator's task to itself beyond the
// runtime's own limits: its one door out (the worker's gateway), its
// output and memory bounds.

// openDoor serves a task's gateway, with the attempt's LLM side when it
// has one (an agent's): on a unix socket in dir for its door container
// to carry the task's connections to, or, for a task with no door (the
// process runtime), on a loopback port. It returns the base URL the task
// reaches it at; close shuts it and every connection through it.
func (s *Sandbox) openDoor(dir string, container bool, llm *gateway.LLM, allow *gateway.Allowance, clock http.Handler, log *zap.Logger) (base string, close func(), err error) {
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("the agent's door: %w", err)
	}
	var l net.Listener
	if container {
		sock := filepath.Join(dir, doorSocket)
		if len(sock) > 107 {
			return "", nil, fmt.Errorf("the gateway socket %s is longer than a unix socket path may be (107 bytes): shorten host.work_dir", sock)
		}
		if l, err = net.Listen("unix", sock); err != nil {
			return "", nil, fmt.Errorf("the agent's door: %w", err)
		}
		// The door container may run as any user of its image.
		if err := os.Chmod(sock, 0o666); err != nil {
			_ = l.Close()
			return "", nil, fmt.Errorf("the agent's door: %w", err)
		}
		base = "http://" + DoorAddr
	} else {
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return "", nil, fmt.Errorf("the agent's gateway: %w", err)
		}
		base = "http://" + l.Addr().String()
	}
	policy := s.Egress
	if policy == nil {
		policy = &gateway.Policy{}
	}
	g := &gateway.Gateway{Policy: policy, Log: log.Named("gateway"), Allowance: allow, Clock: clock}
	if llm != nil {
		g.LLM, g.Record = llm, llm.Record
	}
	go func() {
		if err := g.Serve(l); err != nil {
			log.Warn("the agent's gateway", zap.Error(err))
		}
	}()
	var once sync.Once
	return base, func() {
		once.Do(func() {
			_ = g.Close()
			_ = os.RemoveAll(dir)
		})
	}, nil
}

// Bound limits a task's output (agent.log_limit_mb) and, where the
// runtime set no limit of its own (container.memory_mb, container.cpus
// 0), its memory and CPUs to the task's resources.memory_gb and
// resources.cpus: an agent that outgrows its memory is OOM-killed under
// its own limit (its failure), never the host's OOM killer taking the
// worker and every other attempt down with it, and one agent's CPUs are
// not its neighbours'.
func (s *Sandbox) Bound(spec *runtime.TaskSpec, task *tasks.Spec) {
	spec.LogLimit = s.LogLimit
	if spec.MemoryBytes == 0 && task.Resources.MemoryGB > 0 {
		spec.MemoryBytes = int64(task.Resources.MemoryGB) << 30
	}
	if spec.CPUs == 0 && task.Resources.CPUs > 0 {
		// Docker refuses a limit above the host's CPUs: a smaller host
		// gives what it has.
		spec.CPUs = float64(min(task.Resources.CPUs, goruntime.NumCPU()))
	}
}

// WorkspaceLimits are an attempt's workspace limits for task: its
// resources.disk_gb when it names one (MLRB's 500 GB), else
// agent.workspace_limit_gb.
func (s *Sandbox) WorkspaceLimits(task *tasks.Spec) Limits {
	if task.Resources.DiskGB > 0 {
		return Limits{Bytes: int64(task.Resources.DiskGB) << 30, Entries: s.WorkspaceEntries, bytesFrom: "the task's resources.disk_gb"}
	}
	return Limits{Bytes: s.WorkspaceLimit, Entries: s.WorkspaceEntries, bytesFrom: "agent.workspace_limit_gb"}
}

// Start starts a task, behind its door when it has one (the gateway served
// from doorDir, with a person's clock when it has one); an agent with an
// LLM side (llm) gets its gateway on a loopback port when it has no door,
// and is told where it is and its token. closeDoor shuts the door (once,
// however often it is called); call it once the task is gone.
func (s *Sandbox) Start(ctx context.Context, spec runtime.TaskSpec, doorDir string, llm *gateway.LLM, allow *gateway.Allowance, clock http.Handler, log *zap.Logger) (h runtime.Handle, closeDoor func(), err error) {
	closeDoor = func() {}
	if spec.Door != nil || llm != nil {
		var base string
		if base, closeDoor, err = s.openDoor(doorDir, spec.Door != nil, llm, allow, clock, log); err != nil {
			return nil, nil, err
		}
		if llm != nil {
			if spec.Env == nil {
				spec.Env = map[string]string{}
			}
			maps.Copy(spec.Env, gateway.AgentEnv(base, llm.Token))
			if spec.Door == nil {
				// No door: the process may go around the proxy; told of it,
				// what honours it is recorded and held to the allow-list.
				proxy(spec.Env, base)
			}
			spec.Redact = append(spec.Redact, llm.Token)
		}
	}
	if h, err = s.Workspace.Start(ctx, spec); err != nil {
		closeDoor()
		return nil, nil, err
	}
	return h, closeDoor, nil
}

// RunToEnd runs a task until it exits, its timeout passes (it is killed:
// timedOut), or ctx ends (it is killed: err is ctx's).
func (s *Sandbox) RunToEnd(ctx context.Context, spec runtime.TaskSpec, doorDir string, timeout time.Duration, log *zap.Logger) (res runtime.ExitResult, timedOut bool, err error) {
	h, closeDoor, err := s.Start(ctx, spec, doorDir, nil, nil, nil, log)
	if err != nil {
		return res, false, err
	}
	defer closeDoor()
	defer func() { _ = h.Destroy() }()
	limit := time.NewTimer(timeout)
	defer limit.Stop()
	select {
	case <-ctx.Done():
		_ = h.Kill()
		<-h.Wait()
		return res, false, ctx.Err()
	case <-limit.C:
		_ = h.Kill()
		<-h.Wait()
		return res, true, nil
	case res = <-h.Wait():
		return res, false, nil
	}
}

// Sandbox is how agents and evaluators run, and what bounds them.
type Sandbox struct {
	// Workspace is where attempts and evaluations run (processes or
	// containers), chosen once when the worker is assembled.
	Workspace Workspace
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
	Logger *zap.Logger
}

// Digest records which image really ran: the digest, not the tag ("" for
// processes; the tag when the digest cannot be read).
func (s *Sandbox) Digest(ctx context.Context, image string) string {
	d, err := s.Workspace.Digest(ctx, image)
	if err != nil {
		s.Logger.Warn("image digest", zap.String("image", image), zap.Error(err))
		return image
	}
	return d
}

func RunKey(runID string) string { return url.PathEscape(runID) }
