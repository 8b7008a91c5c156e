package activities

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/logstore"
	"github.com/mlrb/mlrb/internal/runtime"
)

// RunAgent runs one attempt of the agent: restore the last checkpoint into
// a fresh workspace, start the agent with the contract env, heartbeat its
// progress, checkpoint every interval, SIGTERM at the soft deadline, kill
// at the hard one, and take a final checkpoint when it ends.
func (a *Activities) RunAgent(ctx context.Context, in AgentInput) (*AgentResult, error) {
	log := a.Logger.With(zap.String("run", in.RunID), zap.Int("attempt", in.Attempt))
	dir := a.attemptDir(in.RunID, in.Attempt)
	// Earlier attempts of this run are dead (reaped or timed out): their
	// workspaces are replaced by the checkpoint.
	_ = os.RemoveAll(filepath.Dir(dir))
	workspace := filepath.Join(dir, "workspace")
	output := filepath.Join(workspace, "output")
	if err := os.MkdirAll(output, 0o755); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	rs, err := a.restoreWorkspace(ctx, in, dir, workspace)
	if err != nil {
		return nil, err
	}
	var prev *checkpoint.Manifest
	if rs != nil {
		prev = rs.m
		log.Info("restored checkpoint", zap.Int("seq", prev.Seq), zap.Int("files", len(prev.Files)))
	}
	resumed := prev != nil

	left := time.Duration((in.BudgetSeconds - in.UsedSeconds) * float64(time.Second))
	if left <= 0 {
		left = time.Second
	}
	grace := min(in.Grace, left/4)
	start := time.Now()
	deadline := start.Add(left)
	spec, err := a.agentSpec(in, dir, workspace, deadline, left, resumed)
	if err != nil {
		return nil, err
	}
	if rs != nil && rs.tar != nil {
		spec.Restore = rs.tar
	}
	h, err := a.Runtime.Start(ctx, spec)
	rs.release()
	if err != nil {
		return nil, fmt.Errorf("start agent: %w", err)
	}
	logPath := spec.LogPath
	log.Info("agent started", zap.Time("deadline", deadline), zap.Bool("resumed", resumed))

	ck := &checkpointer{a: a, ctx: ctx, runID: in.RunID, attempt: in.Attempt, dir: workspace, seq: in.NextSeq, prev: prev, log: log, task: spec.Name}
	agentSeconds := func() float64 { return in.UsedSeconds + time.Since(start).Seconds() }
	hbEvery := time.Second
	if hb := activity.GetInfo(ctx).HeartbeatTimeout; hb > 0 {
		hbEvery = min(hb/4, time.Second)
	}
	logs := &logstore.Shipper{Store: a.Engine.Store, RunID: in.RunID, Attempt: in.Attempt, Path: logPath}
	shipLogs := func(final bool) {
		if err := logs.Ship(ctx, final); err != nil {
			log.Warn("log segment not stored", zap.Error(err))
		}
	}
	logTick := time.NewTicker(5 * time.Second)
	defer logTick.Stop()
	budget := in.BudgetSeconds
	steer := time.NewTicker(5 * time.Second)
	defer steer.Stop()
	hbTick := time.NewTicker(hbEvery)
	defer hbTick.Stop()
	ckTick := time.NewTicker(in.Interval)
	defer ckTick.Stop()
	soft := time.NewTimer(time.Until(deadline.Add(-grace)))
	defer soft.Stop()
	hard := time.NewTimer(time.Until(deadline))
	defer hard.Stop()
	stoppedBy := StopExited
	heartbeat := func() {
		var off int64
		if st, err := os.Stat(logPath); err == nil {
			off = st.Size()
		}
		activity.RecordHeartbeat(ctx, Progress{AgentSeconds: agentSeconds(), LastCheckpoint: ck.lastSeq(), LogOffset: off})
	}
	heartbeat()
	// handBack checkpoints a stopped agent and returns its attempt to the
	// run as an infra loss with the exact agent time: with the checkpoint
	// in the error, the run resumes from it even before its signal lands.
	handBack := func(used float64, what string) error {
		ck.wait()
		ref, err := ck.save(used, nil)
		_ = h.Destroy()
		if err != nil {
			log.Warn("checkpoint of a stopped agent; its work since the last one is lost", zap.Error(err))
		}
		return temporal.NewApplicationError(what, ErrAgentKilled, Progress{AgentSeconds: used, LastCheckpoint: ck.lastSeq(), Checkpoint: ref})
	}
	stopping := activity.GetWorkerStopChannel(ctx)
	for {
		select {
		case <-stopping:
			// The worker is stopping (a deploy, a drain): stop the agent and
			// hand the attempt back, so the run resumes at once and loses
			// nothing, rather than after a heartbeat timeout from its last
			// checkpoint.
			log.Info("worker stopping: the agent is stopped and checkpointed")
			if err := h.Kill(); err != nil {
				log.Warn("kill", zap.Error(err))
			}
			<-h.Wait()
			used := agentSeconds()
			shipLogs(true)
			return nil, handBack(used, fmt.Sprintf("worker stopping: agent of attempt %d stopped and checkpointed", in.Attempt))
		case <-ctx.Done():
			// The workflow gave up on this attempt or the worker is
			// stopping: the agent never outlives its attempt.
			killOnCancel(h)
			<-h.Wait()
			ck.wait()
			_ = h.Destroy()
			return nil, ctx.Err()
		case <-hbTick.C:
			heartbeat()
		case <-logTick.C:
			shipLogs(false)
		case <-ckTick.C:
			ck.start(agentSeconds())
		case <-steer.C:
			// Operator controls live in the workflow: a granted extension
			// moves the deadlines, a cancel stops the agent gracefully.
			granted, cancel, ok := a.steering(ctx)
			if !ok {
				break
			}
			if granted > budget && stoppedBy == StopExited {
				deadline = deadline.Add(time.Duration((granted - budget) * float64(time.Second)))
				budget = granted
				soft.Reset(time.Until(deadline.Add(-grace)))
				hard.Reset(time.Until(deadline))
				if err := writeDeadline(controlDir(dir), deadline); err != nil {
					log.Warn("the agent's deadline file", zap.Error(err))
				}
				log.Info("budget extended", zap.Time("deadline", deadline))
			}
			if cancel && stoppedBy != StopCanceled {
				stoppedBy = StopCanceled
				log.Info("canceled by an operator: SIGTERM, kill after the grace period")
				if err := h.Signal(syscall.SIGTERM); err != nil {
					log.Warn("SIGTERM", zap.Error(err))
				}
				hard.Reset(grace)
			}
		case <-soft.C:
			if stoppedBy == StopCanceled {
				break
			}
			stoppedBy = StopDeadline
			log.Info("soft deadline: SIGTERM")
			if err := h.Signal(syscall.SIGTERM); err != nil {
				log.Warn("SIGTERM", zap.Error(err))
			}
		case <-hard.C:
			if stoppedBy != StopCanceled {
				stoppedBy = StopDeadline
			}
			log.Info("hard deadline: kill")
			if err := h.Kill(); err != nil {
				log.Warn("kill", zap.Error(err))
			}
		case res := <-h.Wait():
			used := agentSeconds()
			ck.wait()
			heartbeat()
			shipLogs(true)
			// Killed, not by us and not for memory: the container or process
			// was taken from under the agent (docker kill, a host agent). Keep
			// its work and let the workflow run the next attempt.
			killed := stoppedBy == StopExited && res.Signal == int(syscall.SIGKILL) && !res.OOMKilled
			if killed {
				return nil, handBack(used, fmt.Sprintf("agent of attempt %d was killed from outside (%s)", in.Attempt, res))
			}
			end := &checkpoint.Ending{StoppedBy: stoppedBy, ExitCode: res.ExitCode}
			if !res.Successful() && stoppedBy == StopExited {
				end.Reason = res.String()
				if end.ExitCode == 0 {
					end.ExitCode = -1
				}
			}
			err := finalCheckpoint(ctx, ck, used, end, heartbeat)
			if derr := h.Destroy(); derr != nil {
				log.Warn("destroy", zap.Error(derr))
			}
			if err != nil {
				return nil, err
			}
			out := &AgentResult{StoppedBy: stoppedBy, ExitCode: end.ExitCode, Reason: end.Reason, Signal: res.Signal, OOMKilled: res.OOMKilled,
				AgentSeconds: used, Checkpoints: ck.committed(), Image: a.imageDigest(ctx, spec.Image)}
			log.Info("agent ended", zap.String("stopped_by", stoppedBy), zap.String("exit", res.String()), zap.Float64("agent_s", used))
			return out, nil
		}
	}
}

// steering reads the operator's controls from the run: the budget granted
// and whether a cancel was asked for.
func (a *Activities) steering(ctx context.Context) (float64, bool, bool) {
	if a.Client == nil {
		return 0, false, false
	}
	info := activity.GetInfo(ctx)
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := a.Client.QueryWorkflow(qctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, QuerySteering)
	if err != nil {
		return 0, false, false
	}
	var st Steering
	if v.Get(&st) != nil {
		return 0, false, false
	}
	return st.GrantedS, st.CancelRequested, true
}

// finalCheckpoint retries the last checkpoint with backoff until it
// commits: the agent has ended, and only this checkpoint keeps its work.
func finalCheckpoint(ctx context.Context, ck *checkpointer, used float64, end *checkpoint.Ending, heartbeat func()) error {
	delay := time.Second
	for {
		_, err := ck.save(used, end)
		if err == nil {
			return nil
		}
		ck.log.Warn("final checkpoint failed; retrying", zap.Duration("in", delay), zap.Error(err))
		heartbeat()
		select {
		case <-ctx.Done():
			return fmt.Errorf("final checkpoint: %w (gave up: %v)", err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// checkpointer takes periodic checkpoints off the heartbeat path, one at
// a time; a failed one is logged and the agent keeps running.
type checkpointer struct {
	a       *Activities
	ctx     context.Context
	runID   string
	attempt int
	dir     string
	seq     int
	prev    *checkpoint.Manifest
	log     *zap.Logger
	task    string // the runtime task, for container archives
	running chan struct{}
	failed  int        // consecutive failures, touched only by one save at a time
	mu      sync.Mutex // guards done and doneSeq, read by the heartbeat
	done    []CheckpointRef
	doneSeq int
}

func (c *checkpointer) lastSeq() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.doneSeq
}

func (c *checkpointer) committed() []CheckpointRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]CheckpointRef(nil), c.done...)
}

func (c *checkpointer) wait() {
	if c.running != nil {
		<-c.running
		c.running = nil
	}
}

func (c *checkpointer) start(agentSeconds float64) {
	if c.running != nil {
		select {
		case <-c.running:
			c.running = nil
		default:
			return // the previous one is still uploading
		}
	}
	ch := make(chan struct{})
	c.running = ch
	go func() {
		defer close(ch)
		if _, err := c.save(agentSeconds, nil); err != nil {
			c.failed++
			c.log.Warn("checkpoint failed; the agent keeps running", zap.Int("consecutive", c.failed), zap.Error(err))
			c.a.signal(c.ctx, SignalCheckpointFailed, CheckpointFailure{Consecutive: c.failed, Error: err.Error(), At: time.Now().UTC()})
			return
		}
		c.failed = 0
	}()
}

// snapshot reads the workspace: the directory, or the container's paths
// through Docker's archive API.
func (c *checkpointer) snapshot(meta checkpoint.Meta) (*checkpoint.Manifest, error) {
	if c.a.Docker == nil {
		return c.a.Engine.Save(c.ctx, c.dir, meta, c.prev)
	}
	archives, err := c.a.Docker.Archives(c.ctx, c.task, c.a.Containers.Paths)
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
	meta.Workdir = strings.TrimPrefix(c.a.Containers.Workdir, "/")
	return c.a.Engine.SaveTar(c.ctx, srcs, meta, c.prev)
}

// save takes one checkpoint; end is how the agent ended, on the final one.
func (c *checkpointer) save(agentSeconds float64, end *checkpoint.Ending) (*CheckpointRef, error) {
	final := end != nil
	m, err := c.snapshot(checkpoint.Meta{RunID: c.runID, Seq: c.seq, Attempt: c.attempt, AgentSeconds: agentSeconds, Final: final, Ending: end})
	if err != nil {
		return nil, err
	}
	if len(m.Unsettled) > 0 {
		c.log.Warn("files kept changing while checkpointed: they hold their previous version, or are left out if new",
			zap.Int("seq", m.Seq), zap.Strings("files", m.Unsettled))
	}
	if c.a.Keep > 0 {
		if n, err := c.a.Engine.Prune(c.ctx, c.runID, c.a.Keep); err != nil {
			c.log.Warn("retention", zap.Error(err))
		} else if n > 0 {
			c.log.Debug("retention dropped old checkpoints", zap.Int("manifests", n))
		}
	}
	ref := CheckpointRef{Seq: m.Seq, Attempt: c.attempt, AgentSeconds: agentSeconds, At: m.CreatedAt, Files: len(m.Files), Bytes: m.Bytes, NewBytes: m.NewBytes, Final: final, Ending: end}
	c.prev = m
	c.seq++
	c.mu.Lock()
	c.done = append(c.done, ref)
	c.doneSeq = ref.Seq
	c.mu.Unlock()
	c.a.signalCheckpoint(c.ctx, ref)
	c.log.Info("checkpoint committed", zap.Int("seq", ref.Seq), zap.Float64("agent_s", agentSeconds), zap.Int64("new_bytes", m.NewBytes))
	return &ref, nil
}

// writeDeadline replaces dir/deadline atomically, so the agent never reads
// half a timestamp.
func writeDeadline(dir string, d time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("control dir: %w", err)
	}
	tmp := filepath.Join(dir, ".deadline.tmp")
	if err := os.WriteFile(tmp, []byte(d.UTC().Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
		return fmt.Errorf("deadline file: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "deadline")); err != nil {
		return fmt.Errorf("deadline file: %w", err)
	}
	return nil
}

// restored is a resumed attempt's workspace: the checkpoint it came from
// and, for a container, the tree to copy in as the container is created.
type restored struct {
	m       *checkpoint.Manifest
	tar     *io.PipeReader
	staging string
}

// release frees a container restore once the container has its copy (or
// failed to take it): the staging dir, and the writer if the copy stopped
// half way.
func (r *restored) release() {
	if r == nil || r.tar == nil {
		return
	}
	_ = r.tar.Close()
	_ = os.RemoveAll(r.staging)
}

// restoreWorkspace restores the latest usable checkpoint the attempt
// resumes from (none: nil). A container's checkpoint goes into a staging
// dir first, every chunk verified like a directory's, so that a damaged
// one falls back to the checkpoint before.
func (a *Activities) restoreWorkspace(ctx context.Context, in AgentInput, dir, workspace string) (*restored, error) {
	if in.Resume == nil {
		return nil, nil
	}
	src := in.RunID
	if in.Resume.RunID != "" {
		src = in.Resume.RunID // a fork resumes from another run's checkpoint
	}
	into := workspace
	if a.Docker != nil {
		into = filepath.Join(dir, "restore")
	}
	m, err := a.restoreLatest(ctx, src, in.Resume, func(m *checkpoint.Manifest) error {
		if err := os.RemoveAll(into); err != nil {
			return err
		}
		if err := a.Engine.Restore(ctx, m, into); err != nil {
			return err
		}
		return os.MkdirAll(filepath.Join(workspace, "output"), 0o755)
	})
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	r := &restored{m: m}
	if a.Docker != nil {
		pr, pw := io.Pipe()
		go func() {
			tw := tar.NewWriter(pw)
			err := tw.AddFS(os.DirFS(into))
			if err == nil {
				err = tw.Close()
			}
			_ = pw.CloseWithError(err)
		}()
		r.tar, r.staging = pr, into
	}
	return r, nil
}

// controlDir holds the files the harness rewrites while the agent runs
// (its deadline), outside the checkpointed workspace.
func controlDir(attemptDir string) string { return filepath.Join(attemptDir, "control") }

// agentSpec writes the attempt's task spec, prompt and deadline files and
// describes the agent's process or container: the contract env, secrets
// (redacted from its logs), labels and limits.
func (a *Activities) agentSpec(in AgentInput, dir, workspace string, deadline time.Time, left time.Duration, resumed bool) (runtime.TaskSpec, error) {
	var spec runtime.TaskSpec
	specFile := filepath.Join(dir, "task.json")
	if err := writeJSONFile(specFile, in.Task); err != nil {
		return spec, fmt.Errorf("task spec: %w", err)
	}
	prompt, err := in.Task.RenderPrompt()
	if err != nil {
		return spec, temporal.NewNonRetryableApplicationError(err.Error(), ErrBadTask, err)
	}
	promptFile := filepath.Join(dir, "prompt.md")
	if err := os.WriteFile(promptFile, []byte(prompt), 0o644); err != nil {
		return spec, fmt.Errorf("prompt: %w", err)
	}
	control := controlDir(dir)
	if err := writeDeadline(control, deadline); err != nil {
		return spec, err
	}
	workdir, specPath, promptPath, controlPath := workspace, specFile, promptFile, control
	if a.Docker != nil {
		workdir = a.Containers.Workdir
		specPath, promptPath, controlPath = "/mlrb-run/task.json", "/mlrb-run/prompt.md", "/mlrb-control"
	}
	env := map[string]string{
		"MLRB_TASK": in.Task.ID, "MLRB_SEED": strconv.FormatInt(in.Seed, 10),
		"MLRB_WORKDIR": workdir, "MLRB_OUTPUT_DIR": path.Join(filepath.ToSlash(workdir), "output"),
		"MLRB_DEADLINE":               deadline.UTC().Format(time.RFC3339Nano),
		"MLRB_DEADLINE_FILE":          path.Join(filepath.ToSlash(controlPath), "deadline"),
		"MLRB_TIME_REMAINING_SECONDS": secondsEnv(left),
		"MLRB_ATTEMPT":                strconv.Itoa(in.Attempt),
		"MLRB_RESUMED":                map[bool]string{true: "1", false: "0"}[resumed],
		"MLRB_TASK_SPEC":              specPath,
		"MLRB_PROMPT_FILE":            promptPath,
		"TASK_NAME":                   in.Task.ID,
		"BENCHMARK":                   "full_benchmark",
		"PROVIDER":                    in.Provider,
	}
	if in.Task.Suite == "mini" {
		env["BENCHMARK"] = "mini_benchmark"
	}
	secrets, err := a.secretValues(in.Secrets)
	if err != nil {
		return spec, err
	}
	var redact []string
	for k, v := range secrets {
		env[k] = v
		redact = append(redact, v)
	}
	spec = runtime.TaskSpec{
		Name:    fmt.Sprintf("agent-%s-%d", runKey(in.RunID), in.Attempt),
		Command: a.command(agentCommands[in.Agent], map[string]string{"self": a.Self}),
		Env:     env, Dir: workspace, LogPath: filepath.Join(dir, "agent.log"), Devices: in.Lease.Devices,
		Labels: map[string]string{"run": in.RunID, "attempt": strconv.Itoa(in.Attempt), "token": in.Lease.Token, "task": in.Task.ID},
		Redact: redact,
	}
	if a.Docker != nil {
		spec.Image, spec.Dir = a.Containers.AgentImage, "/"
		if in.Agent == "mlrb" {
			spec.Image, spec.Dir = in.Image, ""
		}
		spec.Command = a.command(agentCommands[in.Agent], map[string]string{"self": a.Containers.Self})
		// The control dir, not its file, is mounted: a rewrite replaces the
		// file, which a file mount would not follow.
		spec.Binds = []string{specFile + ":" + specPath + ":ro", promptFile + ":" + promptPath + ":ro", control + ":" + controlPath + ":ro"}
		spec.MemoryBytes, spec.CPUs, spec.PidsLimit = a.Containers.MemoryBytes, a.Containers.CPUs, a.Containers.PidsLimit
	}
	return spec, nil
}
