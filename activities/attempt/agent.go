// RunAgent runs one attempt of the agent.

package attempt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/internal/fleet/metrics"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/logstore"
)

// RunAgent runs one attempt of the agent: prepare its workspace (restored
// from the last checkpoint on a resume), start the agent, supervise it
// (heartbeats, checkpoints, deadlines, the operator's controls) and end
// the attempt with a final checkpoint, or hand it back to the run.
func (a *Attempts) RunAgent(ctx context.Context, in activities.AgentInput) (*activities.AgentResult, error) {
	if in.Interval <= 0 {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("checkpoint interval %s: must be positive", in.Interval), activities.ErrBadTask, nil)
	}
	ctx, lv, err := a.live(ctx, &in.Lease)
	if err != nil {
		return nil, err
	}
	defer lv.Close()
	at := a.attempt(in.RunID, in.Attempt)
	at.State = definition(in).StatePaths
	// The attempt's files are gone with it: its work is in the checkpoints.
	defer a.removeAttempt(at)
	log := a.Logger.With(zap.String("run", in.RunID), zap.Int("attempt", in.Attempt))
	notes := newNotifier(ctx, a.signaller(ctx), log)
	defer notes.close()
	prev, ended, err := a.prepare(lv.Counting(ctx), &in, at, lv, notes, log)
	if err != nil || ended != nil {
		return ended, err
	}
	spec, err := a.agentTask(ctx, in, at, in.Budget.Attempt(time.Now(), in.Grace), prev)
	if err != nil {
		return nil, err
	}
	ai, err := a.llmFor(ctx, in, spec.Redact, at.Allow.Door, func() error { return context.Cause(ctx) }, log)
	if err != nil {
		return nil, err
	}
	ai.reportPrior(notes)
	ob := a.newObserver(&in, log)
	ai.observed(ob)
	lv.Step(host.StepStarting, 0)
	h, person, closeDoor, err := a.startTask(ctx, in, at, spec, ai, log)
	if err != nil {
		return nil, err
	}
	defer closeDoor()
	// The agent's clock starts with its container, not the worker's setup.
	start := time.Now()
	dl := in.Budget.Attempt(start, in.Grace)
	ob.begin(h, ai.redacting(spec.Redact), start)
	// From its start the agent never outlives this activity, whatever
	// ends it (a panic included).
	defer func() {
		if err := h.Destroy(); err != nil {
			log.Warn("destroy", zap.Error(err))
		}
	}()
	lv.Step(host.StepRunning, 0)
	log.Info("agent started", zap.Time("deadline", dl.Hard), zap.Bool("resumed", prev != nil))
	live := a.Metrics.AttemptStarted(in.RunID, in.Task.ID, in.Agent, in.Attempt, prev.Created())
	defer live.Ended()
	hk := a.hooks(ctx, &in, at, prev, spec, lv, ai, notes, live, log)
	hk.ob, hk.ck.added, hk.closeDoor = ob, ob.checkpoint, closeDoor
	hk.deadlineMoved(dl.Hard)
	sv := &supervisor{h: h, dl: dl, stopped: activities.StopExited, started: start, base: in.Budget.UsedS, now: time.Now, hooks: hk, log: log, person: roomClock(person), controlsEvery: a.ControlsEvery}
	end := sv.run(ctx, activity.GetWorkerStopChannel(ctx), activity.GetInfo(ctx).HeartbeatTimeout, in.Interval)
	a.keepWrites(ctx, &in, h, log)
	return a.conclude(ctx, sv, end, hk, notes, spec.Image)
}

// hooks are what supervision calls on: the attempt's checkpointer, its
// log shipper, its LLM ledger and, when the workspace has limits, the
// watch that measures it.
func (a *Attempts) hooks(ctx context.Context, in *activities.AgentInput, at *workspace.Attempt, prev *checkpoint.Manifest, spec runtime.TaskSpec, lv *host.Liveness,
	ai *attemptLLM, notes *notifier, live *metrics.Attempt, log *zap.Logger) *attemptHooks {
	ck := &checkpointer{ws: a.Sandbox.Workspace, engine: a.Runs.Engine, at: at, seq: in.NextSeq, prev: prev, keep: a.Runs.Keep, marks: in.Marks, notes: notes, holdFinal: in.LastInResult,
		log: log, fenced: lv.Fence, live: live}
	hk := &attemptHooks{a: a, ctx: ctx, answers: make(chan steering, 1), at: at, ck: ck, lv: lv, log: log, lease: in.Lease.Token, keepLease: in.KeepLease, llm: ai, notes: notes,
		logs: &logstore.Shipper{Store: a.Runs.Engine.Store, RunID: in.RunID, Attempt: in.Attempt, Path: spec.LogPath}}
	ck.truncated = at.Allow.Exceed
	if lim := a.Sandbox.WorkspaceLimits(&in.Task); lim.Bytes > 0 || lim.Entries > 0 {
		workspace.WatchSize(ctx, at.Dir, lim, a.Sandbox.Workspace.Outside(spec), at.Allow, log)
	}
	return hk
}

// conclude ends an attempt the way supervision ended: a final checkpoint
// and the agent's result, a hand-back checkpoint and an infra loss for
// the run, or nothing when the run gave up on it. Every checkpoint
// reaches the run (notes.flush) before the attempt ends, or is in its
// result (LastInResult).
func (a *Attempts) conclude(ctx context.Context, sv *supervisor, end ending, hk *attemptHooks, notes *notifier, image string) (*activities.AgentResult, error) {
	hk.ck.wait()
	if end.kind == abandoned {
		cause := context.Cause(ctx)
		// The run is done with this attempt: its slot is free now rather
		// than one lease TTL later.
		a.Host.ReleaseOwn(hk.lease)
		hk.ob.finish(ctx, "")
		return nil, fmt.Errorf("attempt %d: %w", hk.at.N, cause)
	}
	hk.reached(end.used)
	hk.shipLastLogs()
	if end.kind == handedBack {
		hk.lv.Step(host.StepHandBack, 0)
		if _, err := hk.ck.save(hk.lv.Counting(ctx), end.used, nil); err != nil {
			hk.log.Warn("checkpoint of a stopped agent; its work since the last one is lost", zap.Error(err))
		}
		hk.closeDoor()
		hk.ob.finish(ctx, observe.EndedHandedBack)
		hk.llm.finish(notes, hk.at.N, false)
		if err := notes.flush(ctx); err != nil {
			return nil, err
		}
		what := fmt.Sprintf("attempt %d: %s", hk.at.N, end.reason)
		return nil, temporal.NewApplicationError(what, activities.ErrAgentKilled, activities.Heartbeat{AgentSeconds: end.used, Released: a.Host.ReleaseOwn(hk.lease)})
	}
	return a.ended(ctx, sv, end, hk, notes, image)
}

// ended ends an attempt whose agent ended with its last checkpoint: the
// final one, or, for a person's attempt released after a long pause
// (StopReleased), one the run resumes from when they come back. Its
// lease is given back unless the run keeps it for its evaluations (never
// on a release).
func (a *Attempts) ended(ctx context.Context, sv *supervisor, end ending, hk *attemptHooks, notes *notifier, image string) (*activities.AgentResult, error) {
	res := agentEnding(sv, end)
	released := sv.stopped == activities.StopReleased
	var ending *checkpoint.Ending // a release's checkpoint is not the final one
	if !released {
		ending = &checkpoint.Ending{StoppedBy: string(res.StoppedBy), ExitCode: res.ExitCode, Reason: res.Reason}
	}
	hold := hk.ck.holdFinal && !released // a checkpoint that is not final is signalled
	hk.lv.Step(host.StepFinalSave, 0)
	final, err := hk.ck.final(hk.lv.Counting(ctx), end.used, ending)
	if err != nil {
		return nil, err
	}
	hk.closeDoor()
	hk.ob.finish(ctx, string(res.StoppedBy))
	usage := hk.llm.finish(notes, hk.at.N, hold)
	if err := notes.flush(ctx); err != nil {
		return nil, err
	}
	if hold {
		res.Final, res.Usage = final, usage
	}
	res.Image = a.Sandbox.Digest(ctx, image)
	if !hk.keepLease || released {
		res.Released = a.Host.ReleaseOwn(hk.lease)
	}
	hk.log.Info("agent ended", zap.String("stopped_by", string(sv.stopped)), zap.String("exit", end.exit.String()), zap.Float64("agent_s", end.used), zap.Float64("paused_s", res.PausedS))
	return res, nil
}

// agentEnding is the result of an agent that ended: how it was stopped,
// and why it failed when it stopped on its own (an exit, a limit).
func agentEnding(sv *supervisor, end ending) *activities.AgentResult {
	res := &activities.AgentResult{StoppedBy: sv.stopped, ExitCode: end.exit.ExitCode, Signal: end.exit.Signal, OOMKilled: end.exit.OOMKilled, AgentSeconds: end.used}
	personal(sv, res)
	switch {
	case killedAtTheHardDeadline(sv, end.exit):
		res.Reason = activities.KilledAfterGrace + ": " + end.exit.String()
	case sv.stopped == activities.StopDeadline || sv.stopped == activities.StopCanceled || sv.stopped == activities.StopLLMBudget:
		res.Reason = "exited after SIGTERM: " + end.exit.String()
	}
	if (!end.exit.Successful() || sv.failure != "") && sv.stopped == activities.StopExited {
		res.Reason = end.exit.String()
		if sv.failure != "" {
			res.Reason = sv.failure
		}
		if res.ExitCode == 0 {
			res.ExitCode = -1
		}
	}
	return res
}

// prepare makes the attempt's workspace: restored from the latest usable
// checkpoint when the attempt resumes one (prev), else fresh. A
// checkpoint of this run that the run never heard of (an attempt lost
// after it committed) is taken over: the run is told, the attempt numbers
// on from it, and when it is a final one the agent had ended: the attempt
// ends with it (ended) and the agent never runs twice.
func (a *Attempts) prepare(ctx context.Context, in *activities.AgentInput, at *workspace.Attempt, lv *host.Liveness, notes *notifier, log *zap.Logger) (prev *checkpoint.Manifest, ended *activities.AgentResult, err error) {
	lv.Step(host.StepPreparing, 0)
	// Earlier attempts of this run are dead (reaped or timed out): what
	// they left is replaced by the checkpoint.
	_ = os.RemoveAll(filepath.Dir(at.Dir))
	if ahead, err := a.unheardOf(ctx, in.RunID, in.NextSeq); err != nil || ahead != nil {
		if err != nil {
			return nil, nil, err
		}
		log.Warn("taking over a checkpoint the run had not heard of", zap.Int("seq", ahead.Seq), zap.Int("by_attempt", ahead.Attempt), zap.Bool("final", ahead.Final))
		ahead.From = in.Attempt
		if e := ahead.Ending; ahead.Final && e != nil {
			res := &activities.AgentResult{StoppedBy: activities.StopReason(e.StoppedBy), ExitCode: e.ExitCode, Reason: e.Reason, AgentSeconds: ahead.AgentSeconds}
			if in.LastInResult {
				res.Final = ahead
				return nil, res, nil
			}
			notes.send(activities.SignalCheckpoint, *ahead)
			if err := notes.flush(ctx); err != nil {
				return nil, nil, err
			}
			return nil, res, nil
		}
		notes.send(activities.SignalCheckpoint, *ahead)
		in.Resume, in.NextSeq = ahead, ahead.Seq+1
		in.Budget.Preserve(ahead.AgentSeconds)
	}
	// From here on this attempt owns the run's checkpoints: an earlier
	// one still running somewhere commits nothing more.
	if err := a.Runs.Engine.Fence(ctx, in.RunID, in.Attempt, in.NextSeq-1); err != nil {
		return nil, nil, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrFencedAttempt, err)
	}
	// Its numbers come after every manifest in the store: a superseded
	// attempt's are never the run's, and their numbers are taken.
	last, err := a.Runs.Engine.LastSeq(ctx, in.RunID)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint numbers: %w", err)
	}
	in.NextSeq = max(in.NextSeq, last+1)
	image := agentImage(*in)
	if in.Resume == nil {
		return nil, nil, a.prepareIn(ctx, at, image, nil)
	}
	src := in.RunID
	if in.Resume.RunID != "" {
		src = in.Resume.RunID // a fork resumes from another run's checkpoint
	}
	m, err := a.restoreLatest(ctx, src, in.Resume, func(m *checkpoint.Manifest) error {
		if err := a.checkSpace(m.Bytes); err != nil {
			return err
		}
		lv.Step(host.StepRestoring, m.Bytes)
		return a.prepareIn(ctx, at, image, m)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("restore: %w", err)
	}
	log.Info("restored checkpoint", zap.Int("seq", m.Seq), zap.Int("files", len(m.Files)))
	return m, nil, nil
}

// prepareIn makes the attempt's workspace; a task the workspace cannot
// give what it asks is never retried.
func (a *Attempts) prepareIn(ctx context.Context, at *workspace.Attempt, image string, m *checkpoint.Manifest) error {
	err := a.Sandbox.Workspace.Prepare(ctx, at, image, m)
	if errors.Is(err, workspace.ErrUnfit) {
		return temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrBadTask, err)
	}
	return err
}

// unheardOf is this run's latest committed checkpoint when the run has
// not heard of it (its sequence number is next or later), else nil.
func (a *Attempts) unheardOf(ctx context.Context, runID string, next int) (*activities.CheckpointRef, error) {
	m, err := a.Runs.Engine.Latest(ctx, runID)
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("latest checkpoint: %w", err)
	}
	if m.Seq < next {
		return nil, nil
	}
	return &activities.CheckpointRef{Seq: m.Seq, Attempt: m.Attempt, AgentSeconds: m.AgentSeconds, At: m.CreatedAt, Files: len(m.Files), Bytes: m.Bytes,
		Final: m.Final, Ending: m.Ending}, nil
}

// removeAttempt removes what the attempt left on this host, and the
// run's directory when no attempt is left in it.
func (a *Attempts) removeAttempt(at *workspace.Attempt) {
	if err := os.RemoveAll(at.Dir); err != nil {
		a.Logger.Warn("remove the attempt's files", zap.String("dir", at.Dir), zap.Error(err))
	}
	_ = os.Remove(filepath.Dir(at.Dir)) // only if empty
}

// agentTask writes the attempt's task spec, prompt and deadline files
// (and, resuming from prev, its resume note) and describes the agent's
// task: the contract env, secrets (redacted from its logs), labels,
// devices.
func (a *Attempts) agentTask(ctx context.Context, in activities.AgentInput, at *workspace.Attempt, dl budget.Deadlines, prev *checkpoint.Manifest) (runtime.TaskSpec, error) {
	resumed := prev != nil
	if resumed {
		if err := a.writeResumeNote(ctx, in, at, prev, a.Logger); err != nil {
			return runtime.TaskSpec{}, err
		}
	}
	if err := host.WriteJSONFile(at.Spec(), agentView(in.Task)); err != nil {
		return runtime.TaskSpec{}, fmt.Errorf("task spec: %w", err)
	}
	prompt, err := in.Task.RenderPrompt()
	if err != nil {
		return runtime.TaskSpec{}, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrBadTask, err)
	}
	if err := os.WriteFile(at.Prompt(), []byte(prompt), 0o644); err != nil {
		return runtime.TaskSpec{}, fmt.Errorf("prompt: %w", err)
	}
	if err := contract.WriteDeadline(at.Control(), dl.Hard); err != nil {
		return runtime.TaskSpec{}, err
	}
	def := definition(in)
	provider := in.LLMProvider
	if def.Provider != "" {
		provider = def.Provider
	}
	env := contract.Env{Task: in.Task.ID, Seed: in.Seed, Deadline: dl.Hard, TimeRemaining: time.Until(dl.Hard), Attempt: in.Attempt,
		Resumed: resumed, Suite: in.Task.Suite, Provider: provider, Model: def.Model, LLMBudgetUSD: in.LLMBudget.USD}
	spec := a.Sandbox.Workspace.AgentTask(at, def.Command(), agentImage(in), &env)
	names := slices.Clone(in.Secrets)
	for _, n := range def.Secrets {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	secrets, err := a.secretValues(names)
	if err != nil {
		return spec, err
	}
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	// The definition's literals first: the contract's variables win
	// (a definition naming one is refused when it is loaded).
	for k, v := range def.Env {
		if !contract.Reserved(k) {
			spec.Env[k] = v
		}
	}
	maps.Copy(spec.Env, env.Environ())
	for k, v := range secrets {
		spec.Env[k] = v
		spec.Redact = append(spec.Redact, v)
	}
	spec.Labels, spec.Devices = at.Labels(in.Lease.Token, in.Task.ID), in.Lease.Devices
	spec.Starting = a.restartDeadline(in, at)
	a.Sandbox.Bound(&spec, &in.Task)
	return spec, a.keepPolicy(ctx, &in, spec, names)
}

// restartDeadline writes the deadline file again just before the agent's
// process starts: the deadline counts from its start, and the setup
// between (the door, the workspace's owner, a daemon under load) must not
// eat a short budget before the agent first reads it.
func (a *Attempts) restartDeadline(in activities.AgentInput, at *workspace.Attempt) func() {
	return func() {
		if err := contract.WriteDeadline(at.Control(), in.Budget.Attempt(time.Now(), in.Grace).Hard); err != nil {
			a.Logger.Warn("deadline file", zap.String("run", in.RunID), zap.Error(err))
		}
	}
}
