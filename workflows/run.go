// RunWorkflow's state, its handlers and its one sequencer.

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

// runState is RunWorkflow's state: its core (what every part sees) and
// its parts, each built in newRunState with the neighbours it uses.
type runState struct {
	runCore
	// intake takes the attempts' signals in; loop runs the agent's
	// attempts; slots are the hosts and GPU slots the run holds.
	intake intake
	loop   attemptLoop
	slots  slots
	// eval is the final evaluation's; gate the operator's retries'.
	eval  evalPhase
	gate  gate
	curve curveState
	// usage is the run's LLM ledger, per attempt; person a person's run's
	// invitations and clock.
	usage  usageState
	person person
}

// newRunState is a run's state with its parts wired, in one place.
func newRunState(in RunInput) *runState {
	r := &runState{runCore: runCore{in: in, pol: in.Policy.withDefaults()}}
	c := &r.runCore
	r.usage = usageState{c: c}
	r.person = person{c: c, gate: &r.gate}
	r.gate = gate{c: c}
	r.slots = slots{c: c}
	r.curve = curveState{c: c, slots: &r.slots, gate: &r.gate}
	r.eval = evalPhase{c: c, slots: &r.slots, gate: &r.gate, curve: &r.curve}
	r.intake = intake{c: c, usage: &r.usage, tookOver: r.loop.tookOver}
	r.loop = attemptLoop{c: c, slots: &r.slots, usage: &r.usage, curve: &r.curve, intake: &r.intake, person: &r.person}
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

// drive is the run's one sequencer: set up, decide how the run ends
// (resolve, attempts, evaluation), finish.
func (r *runState) drive(ctx workflow.Context) (*runs.Result, error) {
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	v, err := r.decide(ctx)
	if err != nil {
		return nil, err
	}
	return r.finish(ctx, v), nil
}

// decide resolves the task, runs the agent's attempts and evaluates what
// they left: the run's verdict.
func (r *runState) decide(ctx workflow.Context) (verdict, error) {
	in := r.in
	resolve := activities.ResolveInput{Task: in.Task, Agent: in.Agent, Image: in.Image, AgentDef: in.AgentDef}
	spec, err := resolveTask.run(ctx, r.env, callArgs{}, resolve)
	if err != nil {
		return verdict{outcome: runs.OutcomeInfraFailed, reason: "resolve task: " + errText(err)}, nil
	}
	r.spec = *spec
	r.st.Store = r.spec.Store
	agent, err := r.startingPoint(ctx)
	if err != nil {
		return verdict{outcome: runs.OutcomeInfraFailed, reason: err.Error()}, nil
	}
	r.st.Budget.LimitS = r.timeLimit().Seconds()
	if agent == nil {
		if agent, err = r.attempts(ctx); err != nil {
			return verdict{outcome: runs.OutcomeInfraFailed, reason: err.Error()}, nil
		}
	}
	return r.judge(ctx, agent)
}

// judge is the verdict on what the agent's attempts left: the final
// model evaluated, and then, once it is scored, its curve.
func (r *runState) judge(ctx workflow.Context, agent *activities.AgentResult) (verdict, error) {
	outcome, why := runs.OutcomeScored, ""
	switch {
	case agent.StoppedBy == activities.StopCanceled:
		return verdict{outcome: runs.OutcomeCanceled, reason: "canceled by an operator; the final checkpoint keeps the work"}, nil
	case agent.StoppedBy == activities.StopExited && agent.ExitCode != 0:
		return verdict{outcome: runs.OutcomeAgentFailed, reason: "agent " + exitText(agent)}, nil
	case r.last == nil:
		return verdict{outcome: runs.OutcomeAgentFailed, reason: "the agent left no checkpoint"}, nil
	case agent.StoppedBy == activities.StopDeadline:
		outcome = runs.OutcomeLimitReached
	case agent.StoppedBy == activities.StopLLMBudget:
		outcome, why = runs.OutcomeLimitReached, r.usage.budgetSpentReason()
	}
	v, err := r.eval.evaluate(ctx, outcome, why)
	if err != nil || v.ev == nil || r.env.version(ctx, versionCurve) != 1 {
		return v, err
	}
	// The marks are scored as the final model was (a retry's image).
	return v, r.curve.scoreOverTime(ctx, v.ev, r.eval.image)
}

// attempts runs the agent's attempts. A person's run waits for its person
// before each lease, and again each time a long pause gave its GPU back.
func (r *runState) attempts(ctx workflow.Context) (*activities.AgentResult, error) {
	for {
		if r.person.human() && !r.st.CancelRequested {
			came, err := r.person.await(ctx)
			if err != nil {
				return nil, err
			}
			if !came && !r.st.CancelRequested {
				why := fmt.Sprintf("the person did not start their clock within human.wait_limit (%s)", r.pol.PersonWaitLimit)
				if r.last != nil { // what they left is evaluated
					return &activities.AgentResult{StoppedBy: activities.StopDeadline, Reason: why}, nil
				}
				return &activities.AgentResult{StoppedBy: activities.StopExited, ExitCode: -1, Reason: why}, nil
			}
		}
		if r.st.CancelRequested && r.person.human() {
			return &activities.AgentResult{StoppedBy: activities.StopCanceled}, nil
		}
		agent, err := r.loop.runAttempts(ctx)
		if err != nil || agent.StoppedBy != activities.StopReleased {
			return agent, err
		}
	}
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
	r.intake.receive(ctx)
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
	if err := r.person.setHandlers(ctx); err != nil {
		return err
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
	r.intake.accept(ctx, *ref)
	r.st.Attempt = max(ref.Attempt, ref.LastAttempt)
	if e := ref.Ending; ref.Final && e != nil {
		return &activities.AgentResult{StoppedBy: activities.StopReason(e.StoppedBy), ExitCode: e.ExitCode, Reason: e.Reason, AgentSeconds: ref.AgentSeconds}, nil
	}
	return nil, nil
}

// steerable tells whether operator controls still apply.
func (r *runState) steerable() error {
	switch r.st.Phase {
	case runs.PhaseResolving, runs.PhaseLeasing, runs.PhaseRunning, runs.PhaseRecovering, runs.PhaseAwaitingPerson:
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
	st.Waiting = r.gate.waiting(map[runs.Phase]string{
		runs.PhaseAwaitingEvalRetry:  r.eval.lastError(),
		runs.PhaseAwaitingCurveRetry: r.curve.lastError(),
	}[st.Phase])
	return st
}
