package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// runState is RunWorkflow's state: everything the status query shows.
type runState struct {
	in         RunInput
	pol        Policy
	st         Status
	spec       activities.ResolvedTask
	last       *activities.CheckpointRef
	ckCh       workflow.ReceiveChannel
	agentImage string
	// eval is the final evaluation's; gate the operator's retries'.
	eval evaluation
	gate gate
	// usage is the run's LLM ledger, per attempt.
	usage usageState
	curve curveState
	// loop runs the agent's attempts; checkpoints are the run's
	// timeline, for its result.
	loop        attemptLoop
	checkpoints []runs.CheckpointInfo
	// env is which code paths the run takes (versions.go).
	env runEnv
	// slots are the hosts and GPU slots the run holds.
	slots slots
}

// newRunState is a run's state with its parts, each of which reads the
// run's input, policy, task and status through it.
func newRunState(in RunInput) *runState {
	r := &runState{in: in, pol: in.Policy.withDefaults()}
	r.loop.r, r.slots.r, r.eval.r, r.curve.r, r.gate.r, r.usage.r = r, r, r, r, r, r
	return r
}

// RunWorkflow drives one run: resolve the task, then attempts of lease →
// restore → agent until the agent ends or the infra-attempt limit is hit,
// then evaluation of the final checkpoint in a fresh workspace.
func RunWorkflow(ctx workflow.Context, in RunInput) (*runs.Result, error) {
	r := newRunState(in)
	r.env = newRunEnv(ctx)
	res, err := r.drive(ctx)
	if err != nil || res == nil {
		return res, err
	}
	if r.env.version(ctx, versionResultStored) == 1 {
		r.storeResult(ctx, res)
	}
	return res, nil
}

// drive is the run: resolve, attempts, evaluation.
func (r *runState) drive(ctx workflow.Context) (*runs.Result, error) {
	in := r.in
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	resolve := activities.ResolveInput{Task: in.Task, Agent: in.Agent, Image: in.Image, AgentDef: in.AgentDef}
	var spec *activities.ResolvedTask
	var err error
	if r.env.isLean() {
		spec, err = resolveTask.callLocal(ctx, localQuick, resolve)
	} else {
		spec, err = resolveTask.call(ctx, callArgs{}, resolve)
	}
	if err != nil {
		return r.finish(ctx, runs.OutcomeInfraFailed, "resolve task: "+errText(err), nil), nil
	}
	r.spec = *spec
	r.st.Store = r.spec.Store
	agent, err := r.startingPoint(ctx)
	if err != nil {
		return r.finish(ctx, runs.OutcomeInfraFailed, err.Error(), nil), nil
	}
	r.st.Budget.LimitS = r.timeLimit().Seconds()
	if agent == nil {
		if agent, err = r.loop.runAttempts(ctx); err != nil {
			return r.finish(ctx, runs.OutcomeInfraFailed, err.Error(), nil), nil
		}
	}
	switch {
	case agent.StoppedBy == activities.StopCanceled:
		return r.finish(ctx, runs.OutcomeCanceled, "canceled by an operator; the final checkpoint keeps the work", nil), nil
	case agent.StoppedBy == activities.StopExited && agent.ExitCode != 0:
		return r.finish(ctx, runs.OutcomeAgentFailed, "agent "+exitText(agent), nil), nil
	case r.last == nil:
		return r.finish(ctx, runs.OutcomeAgentFailed, "the agent left no checkpoint", nil), nil
	case agent.StoppedBy == activities.StopDeadline:
		return r.eval.evaluate(ctx, runs.OutcomeLimitReached, "")
	case agent.StoppedBy == activities.StopLLMBudget:
		return r.eval.evaluate(ctx, runs.OutcomeLimitReached, r.usage.budgetSpentReason())
	}
	return r.eval.evaluate(ctx, runs.OutcomeScored, "")
}

// setup sets the run's state and its handlers up, in one place: the
// queries, the search attributes, the checkpoint signals and the
// operator's updates.
func (r *runState) setup(ctx workflow.Context) error {
	in := r.in
	r.st = Status{RunID: workflow.GetInfo(ctx).WorkflowExecution.ID, Task: in.Task, Agent: in.Agent, Seed: in.Seed, Phase: runs.PhaseResolving}
	if c := in.Carried; c != nil {
		r.st.Budget = c.Carried()
	}
	if err := r.setQueries(ctx); err != nil {
		return err
	}
	if !startedLabelled(ctx, in) {
		if err := workflow.UpsertTypedSearchAttributes(ctx, runLabels(in)...); err != nil {
			return fmt.Errorf("search attributes: %w", err)
		}
	}
	r.receiveCheckpoints(ctx)
	return r.setUpdates(ctx)
}

// startedLabelled tells whether the run started with its labels
// (RunSearchAttributes). Replay sees the same start event, so the choice
// is deterministic: a run started without them (by an older starter, or
// recorded before) upserts them, as it always did.
func startedLabelled(ctx workflow.Context, in RunInput) bool {
	sa := workflow.GetTypedSearchAttributes(ctx)
	task, _ := sa.GetKeyword(SATask)
	agent, _ := sa.GetKeyword(SAAgent)
	phase, _ := sa.GetKeyword(SAPhase)
	bench, _ := sa.GetKeyword(SABenchmark)
	return task == in.Task && agent == in.Agent && phase == string(runs.PhaseResolving) && bench == in.Benchmark
}

// setQueries answers the status query (starter status, the Web UI) and
// the agent activity's steering query (its budget, a cancel).
func (r *runState) setQueries(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) { return r.status(), nil }); err != nil {
		return fmt.Errorf("status query: %w", err)
	}
	if err := workflow.SetQueryHandler(ctx, activities.QuerySteering, func() (activities.Steering, error) {
		return activities.Steering{GrantedS: r.st.Budget.GrantedS(), CancelRequested: r.st.CancelRequested}, nil
	}); err != nil {
		return fmt.Errorf("steering query: %w", err)
	}
	return nil
}

// receiveCheckpoints takes in, for the run's whole life, the checkpoint
// commits and failures and the LLM ledgers its attempts signal.
func (r *runState) receiveCheckpoints(ctx workflow.Context) {
	r.ckCh = workflow.GetSignalChannel(ctx, activities.SignalCheckpoint)
	failCh := workflow.GetSignalChannel(ctx, activities.SignalCheckpointFailed)
	r.usage.ch = workflow.GetSignalChannel(ctx, activities.SignalUsage)
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(r.ckCh, func(c workflow.ReceiveChannel, _ bool) {
			var ref activities.CheckpointRef
			c.Receive(ctx, &ref)
			r.accept(ctx, ref)
		})
		sel.AddReceive(failCh, func(c workflow.ReceiveChannel, _ bool) {
			var f activities.CheckpointFailure
			c.Receive(ctx, &f)
			if r.superseded(ctx, f.From) {
				return
			}
			r.st.CheckpointFailures, r.st.CheckpointError = f.Consecutive, f.Error
		})
		sel.AddReceive(r.usage.ch, func(c workflow.ReceiveChannel, _ bool) {
			var rep activities.UsageReport
			c.Receive(ctx, &rep)
			r.usage.take(rep)
		})
		for {
			sel.Select(ctx)
		}
	})
}

// setUpdates registers the operator's controls, as updates so that each
// is audited in history: extend, cancel, retry-evaluation.
func (r *runState) setUpdates(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateExtend, func(ctx workflow.Context, e Extend) (budget.Account, error) {
		r.st.Budget.Extend(e.By)
		return r.st.Budget, nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, e Extend) error {
		if e.By <= 0 {
			return fmt.Errorf("extend by %s: must be positive", e.By)
		}
		if err := r.pol.CheckInterval(time.Duration((r.st.Budget.GrantedS() + e.By.Seconds()) * float64(time.Second))); err != nil {
			return fmt.Errorf("extend by %s: %w", e.By, err)
		}
		return r.steerable()
	}}); err != nil {
		return fmt.Errorf("extend update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCancel, func(ctx workflow.Context) (Status, error) {
		r.st.CancelRequested = true
		return r.status(), nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context) error { return r.steerable() }}); err != nil {
		return fmt.Errorf("cancel update: %w", err)
	}
	if err := r.eval.setRetryHandler(ctx); err != nil {
		return fmt.Errorf("retry-evaluation update: %w", err)
	}
	if err := r.curve.setRetryHandler(ctx); err != nil {
		return fmt.Errorf("retry-curve update: %w", err)
	}
	return nil
}

// startingPoint loads where a forked or continued run starts from; it
// returns the agent's result when a continued run's agent had already
// ended (only its evaluation is left).
func (r *runState) startingPoint(ctx workflow.Context) (*activities.AgentResult, error) {
	if f := r.in.ForkFrom; f != nil {
		ref, err := loadCheckpoint.call(ctx, callArgs{}, activities.CheckpointSource{RunID: f.RunID, Seq: f.Seq})
		if err != nil {
			return nil, fmt.Errorf("fork: %s", errText(err))
		}
		// The fork inherits the workspace and the agent time it took.
		r.last = ref
		r.st.Budget.Preserve(ref.AgentSeconds)
	}
	if !r.in.Continue {
		return nil, nil
	}
	ref, err := loadCheckpoint.call(ctx, callArgs{}, activities.CheckpointSource{RunID: r.st.RunID, IfAny: true})
	if err != nil {
		return nil, fmt.Errorf("continue: %s", errText(err))
	}
	if ref == nil {
		return nil, nil
	}
	if ref.Seq == 0 { // attempts ran, none committed a checkpoint
		r.st.Attempt = ref.LastAttempt
		return nil, nil
	}
	ref.RunID = "" // its own, not a fork's
	r.accept(ctx, *ref)
	r.st.Attempt = max(ref.Attempt, ref.LastAttempt)
	if e := ref.Ending; ref.Final && e != nil {
		return &activities.AgentResult{StoppedBy: activities.StopReason(e.StoppedBy), ExitCode: e.ExitCode, Reason: e.Reason, AgentSeconds: ref.AgentSeconds}, nil
	}
	return nil, nil
}

// accept takes a committed checkpoint in. Checkpoints come in commit
// order; one seen again (a signal retried after a lost answer) is
// ignored, and so is one from a superseded attempt.
func (r *runState) accept(ctx workflow.Context, c activities.CheckpointRef) {
	if r.last != nil && c.Seq <= r.last.Seq || r.superseded(ctx, c.From) {
		return
	}
	r.st.Checkpoints++
	r.st.CheckpointFailures, r.st.CheckpointError = 0, ""
	if c.RunID == "" { // a fork's inherited checkpoint is not its own
		r.checkpoints = append(r.checkpoints, runs.CheckpointInfo{Seq: c.Seq, Attempt: c.Attempt, At: c.At, AgentS: c.AgentSeconds,
			Files: c.Files, Bytes: c.Bytes, NewBytes: c.NewBytes, Final: c.Final})
	}
	cp := c
	r.last = &cp
	r.loop.tookOver(c, r.st.Budget.UsedS)
	r.st.Budget.Preserve(c.AgentSeconds)
}

// superseded tells whether a signal comes from an attempt other than the
// current one (a zombie: its worker lost, its agent still running); such
// signals never move the run. From 0 is a signal sent before attempts
// said who they were.
func (r *runState) superseded(ctx workflow.Context, from int) bool {
	if from == 0 || from == r.st.Attempt {
		return false
	}
	workflow.GetLogger(ctx).Warn("ignored a signal from a superseded attempt", "from", from, "attempt", r.st.Attempt)
	return true
}

// drainCheckpoints takes in the checkpoint signals already received, then
// what the attempt's result carries (its final checkpoint and ledger,
// AgentInput.LastInResult; nil when it failed): an attempt delivers all
// of its own before it ends, so after it ended the run knows its last
// checkpoint. Taking them from the result adds no command, so runs
// recorded when they came as signals replay the same.
//
// Signals that came in the same workflow task as the attempt's end may
// already be handed to the signal goroutine's selector, whose callback
// runs only when this coroutine yields: it yields once first (no
// command), so they are taken in while the attempt is still current.
func (r *runState) drainCheckpoints(ctx workflow.Context, out *activities.AgentResult) {
	yielded := false
	_ = workflow.Await(ctx, func() bool {
		done := yielded
		yielded = true
		return done
	})
	var ref activities.CheckpointRef
	for r.ckCh.ReceiveAsync(&ref) {
		r.accept(ctx, ref)
		ref = activities.CheckpointRef{}
	}
	r.usage.drain()
	if out == nil {
		return
	}
	if out.Usage != nil {
		r.usage.take(*out.Usage)
	}
	if out.Final != nil {
		r.accept(ctx, *out.Final)
	}
}

// steerable tells whether operator controls still apply.
func (r *runState) steerable() error {
	switch r.st.Phase {
	case runs.PhaseResolving, runs.PhaseLeasing, runs.PhaseRunning, runs.PhaseRecovering:
		return nil
	}
	return fmt.Errorf("run is %s: the agent has finished", r.st.Phase)
}

// status is the run's state as the status query shows it.
func (r *runState) status() Status {
	st := r.st
	if r.last != nil && r.last.RunID == "" { // a fork's inherited checkpoint is not its own
		st.LastCheckpointAt, st.LastCheckpointAgentS = r.last.At, r.last.AgentSeconds
	}
	st.CheckpointStale = st.CheckpointFailures >= r.pol.CheckpointAlertAfter
	st.LLM = r.usage.llm()
	st.Curve = slices.Clone(r.curve.marks)
	st.Waiting = r.gate.waiting()
	return st
}

func (r *runState) nextSeq() int {
	if r.last == nil {
		return 1
	}
	return r.last.Seq + 1
}

func (r *runState) setPhase(ctx workflow.Context, phase runs.Phase) {
	if r.st.Phase == phase {
		return
	}
	r.st.Phase = phase
	if err := workflow.UpsertTypedSearchAttributes(ctx, SAPhase.ValueSet(string(phase))); err != nil {
		workflow.GetLogger(ctx).Warn("upsert phase", "error", err)
	}
}
