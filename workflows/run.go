package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
)

// run is RunWorkflow's state: everything the status query shows.
type run struct {
	in          RunInput
	st          Status
	spec        activities.ResolvedTask
	last        *activities.CheckpointRef
	checkpoints map[int]bool
	agentImage  string
	evals       []EvalAttempt
}

// timeLimit is the run's budget before extensions: the task's, unless the
// run overrides it (zero until the task is resolved).
func (r *run) timeLimit() time.Duration {
	if r.in.TimeLimit > 0 {
		return r.in.TimeLimit
	}
	return r.spec.Spec.TimeLimit.D()
}

// RunWorkflow drives one run: resolve the task, then attempts of lease →
// restore → agent until the agent ends or the infra-attempt limit is hit,
// then evaluation of the final checkpoint in a fresh workspace.
func RunWorkflow(ctx workflow.Context, in RunInput) (*RunResult, error) {
	info := workflow.GetInfo(ctx)
	r := &run{in: in, checkpoints: map[int]bool{}}
	r.st = Status{RunID: info.WorkflowExecution.ID, Task: in.Task, Agent: in.Agent, Seed: in.Seed, Phase: PhaseResolving}
	if c := in.Carried; c != nil {
		r.st.Budget.LostS, r.st.Budget.InfraWaitS = c.LostS, c.InfraWaitS
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) { return r.status(), nil }); err != nil {
		return nil, fmt.Errorf("status query: %w", err)
	}
	if err := workflow.SetQueryHandler(ctx, activities.QuerySteering, func() (activities.Steering, error) {
		return activities.Steering{GrantedS: r.st.Budget.GrantedS, CancelRequested: r.st.CancelRequested}, nil
	}); err != nil {
		return nil, fmt.Errorf("steering query: %w", err)
	}
	sas := []temporal.SearchAttributeUpdate{SATask.ValueSet(in.Task), SAAgent.ValueSet(in.Agent), SAPhase.ValueSet(PhaseResolving)}
	if in.Benchmark != "" {
		sas = append(sas, SABenchmark.ValueSet(in.Benchmark))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, sas...); err != nil {
		return nil, fmt.Errorf("search attributes: %w", err)
	}
	ckCh := workflow.GetSignalChannel(ctx, activities.SignalCheckpoint)
	failCh := workflow.GetSignalChannel(ctx, activities.SignalCheckpointFailed)
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(ckCh, func(c workflow.ReceiveChannel, _ bool) {
			var ref activities.CheckpointRef
			c.Receive(ctx, &ref)
			r.commit(ref)
		})
		sel.AddReceive(failCh, func(c workflow.ReceiveChannel, _ bool) {
			var f activities.CheckpointFailure
			c.Receive(ctx, &f)
			r.st.CheckpointFailures, r.st.CheckpointError = f.Consecutive, f.Error
		})
		for {
			sel.Select(ctx)
		}
	})

	// Operator controls, as updates so that each is audited in history.
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateExtend, func(ctx workflow.Context, e Extend) (Ledger, error) {
		r.st.Budget.GrantedS += e.By.Seconds()
		return r.st.Budget, nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, e Extend) error {
		if e.By <= 0 {
			return fmt.Errorf("extend by %s: must be positive", e.By)
		}
		return r.steerable()
	}}); err != nil {
		return nil, fmt.Errorf("extend update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCancel, func(ctx workflow.Context) (Status, error) {
		r.st.CancelRequested = true
		return r.status(), nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context) error { return r.steerable() }}); err != nil {
		return nil, fmt.Errorf("cancel update: %w", err)
	}
	shortCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5, NonRetryableErrorTypes: []string{activities.ErrBadTask}},
	})
	if err := workflow.ExecuteActivity(shortCtx, activities.ResolveTaskName, activities.ResolveInput{Task: in.Task, Agent: in.Agent, Image: in.Image}).Get(ctx, &r.spec); err != nil {
		return r.finish(ctx, OutcomeInfraFailed, "resolve task: "+errText(err), nil), nil
	}
	if in.ForkFrom != nil {
		var ref activities.CheckpointRef
		src := activities.CheckpointSource{RunID: in.ForkFrom.RunID, Seq: in.ForkFrom.Seq}
		if err := workflow.ExecuteActivity(shortCtx, activities.LoadCheckpointName, src).Get(ctx, &ref); err != nil {
			return r.finish(ctx, OutcomeInfraFailed, "fork: "+errText(err), nil), nil
		}
		// The fork inherits the workspace and the agent time it took.
		r.last = &ref
		r.st.Budget.Preserve(ref.AgentSeconds)
	}
	var agent *activities.AgentResult
	if in.Continue {
		var ref *activities.CheckpointRef
		src := activities.CheckpointSource{RunID: r.st.RunID, IfAny: true}
		if err := workflow.ExecuteActivity(shortCtx, activities.LoadCheckpointName, src).Get(ctx, &ref); err != nil {
			return r.finish(ctx, OutcomeInfraFailed, "continue: "+errText(err), nil), nil
		}
		if ref != nil {
			ref.RunID = "" // its own, not a fork's
			r.commit(*ref)
			r.st.Attempt = ref.Attempt
			if ref.Final && ref.Ending != nil {
				// The agent had ended: only its evaluation is left.
				e := ref.Ending
				agent = &activities.AgentResult{StoppedBy: e.StoppedBy, ExitCode: e.ExitCode, Reason: e.Reason, AgentSeconds: ref.AgentSeconds}
			}
		}
	}
	r.st.Budget.GrantedS = r.timeLimit().Seconds()

	if agent == nil {
		var err error
		if agent, err = r.runAttempts(ctx); err != nil {
			return r.finish(ctx, OutcomeInfraFailed, err.Error(), nil), nil
		}
	}
	if agent.StoppedBy == activities.StopCanceled {
		return r.finish(ctx, OutcomeCanceled, "canceled by an operator; the final checkpoint keeps the work", nil), nil
	}
	if agent.StoppedBy == activities.StopExited && agent.ExitCode != 0 {
		return r.finish(ctx, OutcomeAgentFailed, "agent "+exitText(agent), nil), nil
	}
	outcome := OutcomeScored
	if agent.StoppedBy == activities.StopDeadline {
		outcome = OutcomeLimitReached
	}
	if r.last == nil {
		return r.finish(ctx, OutcomeAgentFailed, "the agent left no checkpoint", nil), nil
	}
	return r.evaluate(ctx, outcome)
}

// runAttempts runs the agent, re-leasing and resuming after infra losses.
func (r *run) runAttempts(ctx workflow.Context) (*activities.AgentResult, error) {
	p := r.in.Policy
	first := r.st.Attempt // attempts of an earlier execution, on a continued run
	for attempt := first + 1; attempt <= first+p.MaxInfraAttempts; attempt++ {
		r.st.Attempt = attempt
		if attempt > 1 {
			r.setPhase(ctx, PhaseRecovering)
		}
		r.setPhase(ctx, PhaseLeasing)
		leaseStart := workflow.Now(ctx)
		var lease activities.Lease
		leaseCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			ScheduleToCloseTimeout: p.LeaseTimeout,
			StartToCloseTimeout:    30 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{
				InitialInterval: time.Second, BackoffCoefficient: 1.5, MaximumInterval: 30 * time.Second,
				NonRetryableErrorTypes: []string{activities.ErrBadTask},
			},
		})
		req := activities.LeaseRequest{RunID: r.st.RunID, Attempt: attempt, GPUCount: r.spec.Spec.Resources.GPUCount, GPUType: r.spec.Spec.Resources.GPUType}
		if err := workflow.ExecuteActivity(leaseCtx, activities.AcquireLeaseName, req).Get(ctx, &lease); err != nil {
			return nil, fmt.Errorf("no GPU lease for attempt %d: %s", attempt, errText(err))
		}
		r.st.Budget.Wait(workflow.Now(ctx).Sub(leaseStart).Seconds())

		if r.st.CancelRequested {
			r.release(ctx, lease)
			return &activities.AgentResult{StoppedBy: activities.StopCanceled}, nil
		}
		r.setPhase(ctx, PhaseRunning)
		started := workflow.Now(ctx)
		r.st.AttemptStartedAt = started
		base := r.st.Budget.UsedS
		left := time.Duration(r.st.Budget.Left() * float64(time.Second))
		agentCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: lease.HostQueue,
			// A host that never comes back is noticed here and by the
			// heartbeat timeout; either way the run leases again.
			ScheduleToStartTimeout: 5*p.HeartbeatTimeout + time.Minute,
			StartToCloseTimeout:    left + 2*p.Grace + 10*time.Minute,
			HeartbeatTimeout:       p.HeartbeatTimeout,
			WaitForCancellation:    true,
			RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		in := activities.AgentInput{
			RunID: r.st.RunID, Attempt: attempt, Task: r.spec.Spec, Agent: r.in.Agent, Seed: r.in.Seed,
			Provider: r.in.Provider, Image: r.in.Image, Secrets: r.in.Secrets, Lease: lease, UsedSeconds: base, BudgetSeconds: r.st.Budget.GrantedS,
			Resume: r.last, NextSeq: r.nextSeq(), Interval: p.CheckpointInterval, Grace: p.Grace,
		}
		var res activities.AgentResult
		err := workflow.ExecuteActivity(agentCtx, activities.RunAgentName, in).Get(ctx, &res)
		r.release(ctx, lease)
		if err == nil {
			for _, c := range res.Checkpoints {
				r.commit(c)
			}
			// A completed attempt ends on its final checkpoint: all its time counts.
			r.st.Budget.Preserve(res.AgentSeconds)
			r.agentImage = res.Image
			return &res, nil
		}
		if !isInfraLoss(err) {
			return nil, fmt.Errorf("agent attempt %d: %s", attempt, errText(err))
		}
		if ref := handedBack(err); ref != nil {
			r.commit(*ref)
		}
		wall := workflow.Now(ctx).Sub(started)
		r.st.Budget.Crash(ranTo(err, base, wall, p.HeartbeatTimeout), wall.Seconds(), base)
		workflow.GetLogger(ctx).Warn("agent attempt lost; resuming from the last checkpoint",
			"attempt", attempt, "error", errText(err), "lost_s", r.st.Budget.LostS)
	}
	return nil, fmt.Errorf("gave up after %d infra attempts", p.MaxInfraAttempts)
}

// steerable tells whether operator controls still apply.
func (r *run) steerable() error {
	switch r.st.Phase {
	case PhaseResolving, PhaseLeasing, PhaseRunning, PhaseRecovering:
		return nil
	}
	return fmt.Errorf("run is %s: the agent has finished", r.st.Phase)
}

// ranTo estimates how far a lost attempt got, in agent seconds. The last
// heartbeat's details are a lower bound, stale by up to the SDK's
// heartbeat throttle (0.8 × timeout); the server last heard of the worker
// about one heartbeat timeout before it declared the attempt lost, which
// bounds it from above unless the server itself was down meanwhile.
func ranTo(err error, base float64, wall, hbTimeout time.Duration) float64 {
	known := base
	var hb activities.Progress
	var te *temporal.TimeoutError
	var ae *temporal.ApplicationError
	if errors.As(err, &te) && te.HasLastHeartbeatDetails() && te.LastHeartbeatDetails(&hb) == nil && hb.AgentSeconds > known {
		known = hb.AgentSeconds
	} else if errors.As(err, &ae) && ae.Type() == activities.ErrAgentKilled && ae.HasDetails() && ae.Details(&hb) == nil {
		// The activity saw the kill itself: its figure is exact.
		return max(base, hb.AgentSeconds)
	}
	if est := base + (wall - hbTimeout).Seconds(); est > known {
		return min(est, known+0.8*hbTimeout.Seconds())
	}
	return known
}

// handedBack is the checkpoint a stopped agent's attempt came back with.
func handedBack(err error) *activities.CheckpointRef {
	var ae *temporal.ApplicationError
	var p activities.Progress
	if errors.As(err, &ae) && ae.Type() == activities.ErrAgentKilled && ae.HasDetails() && ae.Details(&p) == nil {
		return p.Checkpoint
	}
	return nil
}

// isInfraLoss tells a lost attempt (timeout, worker or host gone, a
// failure of the machinery) from one that must end the run.
func isInfraLoss(err error) bool {
	if temporal.IsCanceledError(err) {
		return false
	}
	var ae *temporal.ApplicationError
	return !errors.As(err, &ae) || ae.Type() != activities.ErrBadTask
}

func (r *run) release(ctx workflow.Context, lease activities.Lease) {
	// Best effort: a lease on a dead host died with it.
	relCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              lease.HostQueue,
		ScheduleToStartTimeout: time.Minute,
		StartToCloseTimeout:    30 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	dctx, cancel := workflow.NewDisconnectedContext(relCtx)
	defer cancel()
	_ = workflow.ExecuteActivity(dctx, activities.ReleaseLeaseName, lease).Get(dctx, nil)
}

func (r *run) evaluate(ctx workflow.Context, outcome string) (*RunResult, error) {
	r.setPhase(ctx, PhaseEvaluating)
	ev, err := r.runEvaluation(ctx, "")
	if err == nil {
		return r.finish(ctx, outcome, "", ev), nil
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.Type() == activities.ErrNoModel {
		return r.finish(ctx, OutcomeAgentFailed, "no model to evaluate: "+errText(err), nil), nil
	}
	// Retries ran out: wait for someone to fix the evaluator and retry it
	// in place, rather than fail a run whose agent work is done.
	r.setPhase(ctx, PhaseAwaitingEvalRetry)
	var scored *activities.EvalResult
	busy := false
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRetryEvaluation,
		func(ctx workflow.Context, req RetryEvaluation) (EvalAttempt, error) {
			busy = true
			defer func() { busy = false }()
			r.setPhase(ctx, PhaseEvaluating)
			ev, err := r.runEvaluation(ctx, req.Image)
			if err != nil {
				r.setPhase(ctx, PhaseAwaitingEvalRetry)
			} else {
				scored = ev
			}
			return r.evals[len(r.evals)-1], nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req RetryEvaluation) error {
			if r.st.Phase != PhaseAwaitingEvalRetry || busy {
				return fmt.Errorf("run is %s, not %s", r.st.Phase, PhaseAwaitingEvalRetry)
			}
			return nil
		}},
	); err != nil {
		return nil, fmt.Errorf("retry-evaluation update: %w", err)
	}
	ok, err := workflow.AwaitWithTimeout(ctx, max(r.in.Policy.EvalWaitLimit, time.Second), func() bool { return scored != nil })
	if err != nil {
		return nil, err
	}
	if err := workflow.Await(ctx, func() bool { return !busy }); err != nil {
		return nil, err
	}
	if !ok && scored == nil {
		return r.finish(ctx, OutcomeEvaluationFailed, "evaluation failed and no retry came within the wait limit: "+r.evals[len(r.evals)-1].Error, nil), nil
	}
	return r.finish(ctx, outcome, "", scored), nil
}

// runEvaluation evaluates the final checkpoint with the retry policy and
// records the attempt.
func (r *run) runEvaluation(ctx workflow.Context, image string) (*activities.EvalResult, error) {
	timeout := r.spec.Spec.Evaluation.Timeout.D()
	evalCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout + time.Minute,
		HeartbeatTimeout:    max(r.in.Policy.HeartbeatTimeout, 30*time.Second),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			MaximumAttempts:        int32(max(1, r.in.Policy.EvalAttempts)),
			NonRetryableErrorTypes: []string{activities.ErrNoModel, activities.ErrBadTask},
		},
	})
	var ev activities.EvalResult
	err := workflow.ExecuteActivity(evalCtx, activities.EvaluateName, activities.EvalInput{
		RunID: r.st.RunID, Task: r.spec.Spec, Seed: r.in.Seed, Final: *r.last, Image: image,
	}).Get(ctx, &ev)
	att := EvalAttempt{Image: image, At: workflow.Now(ctx)}
	if err != nil {
		att.Error = errText(err)
	} else {
		score := ev.Score
		att.Score = &score
		if ev.Image != "" {
			att.Image = ev.Image
		}
	}
	r.evals = append(r.evals, att)
	if err != nil {
		return nil, err
	}
	return &ev, nil
}

func (r *run) commit(c activities.CheckpointRef) {
	if r.checkpoints[c.Seq] {
		return
	}
	r.checkpoints[c.Seq] = true
	r.st.CheckpointFailures, r.st.CheckpointError = 0, ""
	if r.last == nil || c.Seq > r.last.Seq {
		cp := c
		r.last = &cp
	}
	r.st.Budget.Preserve(c.AgentSeconds)
}

// status is the run's state as the status query shows it; what derives
// from the checkpoints is computed here, not kept twice.
func (r *run) status() Status {
	st := r.st
	st.Checkpoints = len(r.checkpoints)
	if r.last != nil && r.last.RunID == "" { // a fork's inherited checkpoint is not its own
		st.LastCheckpointAt, st.LastCheckpointAgentS = r.last.At, r.last.AgentSeconds
	}
	st.CheckpointStale = st.CheckpointFailures >= max(1, r.in.Policy.CheckpointAlertAfter)
	return st
}

func (r *run) nextSeq() int {
	if r.last == nil {
		return 1
	}
	return r.last.Seq + 1
}

func (r *run) setPhase(ctx workflow.Context, phase string) {
	if r.st.Phase == phase {
		return
	}
	r.st.Phase = phase
	if err := workflow.UpsertTypedSearchAttributes(ctx, SAPhase.ValueSet(phase)); err != nil {
		workflow.GetLogger(ctx).Warn("upsert phase", "error", err)
	}
}

func (r *run) finish(ctx workflow.Context, outcome, reason string, ev *activities.EvalResult) *RunResult {
	r.setPhase(ctx, PhaseDone)
	r.st.Outcome = outcome
	if err := workflow.UpsertTypedSearchAttributes(ctx, SAOutcome.ValueSet(outcome)); err != nil {
		workflow.GetLogger(ctx).Warn("upsert outcome", "error", err)
	}
	res := &RunResult{
		RunID: r.st.RunID, Task: r.in.Task, Agent: r.in.Agent, Seed: r.in.Seed, Outcome: outcome,
		Attempts: r.st.Attempt, Checkpoints: len(r.checkpoints), SpecHash: r.spec.Hash, Budget: r.st.Budget, Reason: reason,
		Metrics: map[string]float64{}, AgentImage: r.agentImage, Evaluations: r.evals, EvalTries: len(r.evals),
	}
	if r.spec.Hash != "" { // resolved
		res.TimeLimitS, res.Hardware = r.timeLimit().Seconds(), hardwareClass(r.spec.Spec.Resources.GPUCount, r.spec.Spec.Resources.GPUType)
	}
	gpus := float64(r.spec.Spec.Resources.GPUCount)
	b := r.st.Budget
	res.Cost = Cost{AgentHours: b.UsedS / 3600, GPUHours: b.UsedS * gpus / 3600, InfraWaitHours: b.InfraWaitS / 3600, WastedGPUHours: b.LostS * gpus / 3600}
	if ev != nil && ev.Usage != nil {
		res.Cost.LLMInputTokens, res.Cost.LLMOutputTokens, res.Cost.LLMUSD = ev.Usage.InputTokens, ev.Usage.OutputTokens, ev.Usage.CostUSD
	}
	if ev != nil {
		score := ev.Score
		res.Score, res.Metrics, res.ModelPath, res.Violations = &score, ev.Metrics, ev.ModelPath, ev.Violations
		res.EvaluatorImage = ev.Image
		r.st.Score = &score
	}
	return res
}

func exitText(a *activities.AgentResult) string {
	if a.Reason != "" {
		return a.Reason
	}
	return fmt.Sprintf("exited with code %d", a.ExitCode)
}

// errText unwraps Temporal's error chain to the message that says what
// went wrong.
func errText(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Error()
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return "timeout (" + timeoutName(te.TimeoutType()) + ")"
	}
	return err.Error()
}

func timeoutName(t enumspb.TimeoutType) string {
	switch t {
	case enumspb.TIMEOUT_TYPE_HEARTBEAT:
		return "no heartbeat: worker or host lost"
	case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
		return "no worker picked it up"
	case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
		return "ran past its time"
	default:
		return t.String()
	}
}

// hardwareClass names what a run ran on, for the leaderboard.
func hardwareClass(gpus int, gpuType string) string {
	switch {
	case gpus == 0:
		return "CPU"
	case gpuType == "":
		return fmt.Sprintf("%d× GPU", gpus)
	}
	return fmt.Sprintf("%d× %s", gpus, gpuType)
}
