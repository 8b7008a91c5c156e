package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/budget"
	"github.com/mlrb/mlrb/internal/runs"
)

// timeLimit is the run's budget before extensions: the task's, unless the
// run overrides it (zero until the task is resolved).
func (r *runState) timeLimit() time.Duration {
	if r.in.TimeLimit > 0 {
		return r.in.TimeLimit
	}
	return r.spec.Spec.TimeLimit.D()
}

// runAttempts runs the agent, re-leasing and resuming after infra losses.
func (r *runState) runAttempts(ctx workflow.Context) (*activities.AgentResult, error) {
	p := r.pol
	first := r.st.Attempt // attempts of an earlier execution, on a continued run
	for attempt := first + 1; attempt <= first+p.MaxInfraAttempts; attempt++ {
		r.st.Attempt = attempt
		if attempt > 1 {
			r.setPhase(ctx, runs.PhaseRecovering)
		}
		lease, again, err := r.leaseFor(ctx, attempt)
		if err != nil {
			return nil, err
		}
		if again {
			continue
		}
		leased := workflow.Now(ctx)
		if r.st.CancelRequested {
			r.slots.release(ctx, lease)
			r.slots.held(ctx, leased)
			r.slots.releaseHost(ctx)
			return &activities.AgentResult{StoppedBy: activities.StopCanceled}, nil
		}
		res, lost, err := r.runAgent(ctx, attempt, lease, leased)
		if !lost {
			return res, err
		}
	}
	return nil, fmt.Errorf("gave up after %d infra attempts", p.MaxInfraAttempts)
}

// leaseFor provisions a host (if the run is provisioned) and leases a slot
// on it for attempt; the wait is booked as infra time. again: the
// provisioned host never served its lease and was given back, and the
// next attempt provisions another.
func (r *runState) leaseFor(ctx workflow.Context, attempt int) (lease activities.Lease, again bool, err error) {
	r.setPhase(ctx, runs.PhaseLeasing)
	leaseStart := workflow.Now(ctx)
	r.st.LeasingSince = leaseStart
	queue, err := r.slots.provision(ctx, "", attempt, 0)
	if err != nil {
		return lease, false, fmt.Errorf("no host for attempt %d: %s", attempt, errText(err))
	}
	req := activities.LeaseRequest{RunID: r.st.RunID, Attempt: attempt, GPUCount: r.spec.Spec.Resources.GPUCount, GPUType: r.spec.Spec.Resources.GPUType}
	got, err := acquireLease.call(ctx, callArgs{pol: r.pol, hostQueue: queue}, req)
	if err != nil {
		provisioned := r.st.Host != nil
		r.slots.releaseHost(ctx)
		// A provisioned host that never served its lease (it did not
		// boot, its worker died) is an infra loss: another is
		// provisioned, up to the attempt limit.
		if provisioned && r.version(ctx, versionReprovision) == 1 {
			r.st.LeasingSince = time.Time{}
			r.st.Budget.Wait(workflow.Now(ctx).Sub(leaseStart).Seconds())
			workflow.GetLogger(ctx).Warn("the provisioned host never served its lease; provisioning another", "attempt", attempt, "error", errText(err))
			return lease, true, nil
		}
		return lease, false, fmt.Errorf("no GPU lease for attempt %d: %s", attempt, errText(err))
	}
	lease = *got
	r.st.LeasingSince = time.Time{}
	wait := workflow.Now(ctx).Sub(leaseStart)
	r.slots.leaseWaitS = wait.Seconds()
	r.st.Budget.Wait(wait.Seconds())
	r.metrics(ctx).Timer(MetricLeaseWait).Record(wait)
	r.metrics(ctx).Timer(MetricInfraWait).Record(wait)
	return lease, false, nil
}

// runAgent runs one attempt of the agent on its lease and gives the lease
// and the host back. An attempt lost to the infrastructure books its time
// (refunding what ran past the last checkpoint) and says so (lost): the
// next attempt resumes; any error ends the run.
func (r *runState) runAgent(ctx workflow.Context, attempt int, lease activities.Lease, leased time.Time) (res *activities.AgentResult, lost bool, err error) {
	p := r.pol
	r.setPhase(ctx, runs.PhaseRunning)
	started := workflow.Now(ctx)
	r.st.AttemptStartedAt = started
	base := r.st.Budget.UsedS
	in := activities.AgentInput{
		RunID: r.st.RunID, Attempt: attempt, Task: r.spec.Spec, Agent: r.in.Agent, Seed: r.in.Seed,
		LLMProvider: r.in.LLMProvider, Image: r.image(), Secrets: r.in.Secrets, AgentDef: r.in.AgentDef, Lease: lease, Budget: r.st.Budget,
		Resume: r.last, NextSeq: r.nextSeq(), Interval: r.interval(), Grace: p.Grace, LLMBudget: r.llmBudget(), Marks: r.curve.curveMarks(),
		KeepLease: r.lean && r.st.Host == nil,
	}
	var bytes int64
	if r.last != nil {
		bytes = r.last.Bytes // to restore, and about as much to save
	}
	out, err := runAgent.call(ctx, callArgs{pol: p, lease: lease, ledger: r.st.Budget, bytes: bytes}, in)
	r.drainCheckpoints(ctx)
	rec := runs.AttemptRecord{N: attempt, Host: lease.HostID, LeaseWaitS: r.slots.leaseWaitS, LeasedAt: leased, FromS: base}
	defer func() {
		rec.EndedAt, rec.ToS = workflow.Now(ctx), r.st.Budget.UsedS
		r.attempts = append(r.attempts, rec)
	}()
	kept := err == nil && !out.Released && r.slots.keepForScoring(lease, leased)
	if kept {
		// Its evaluations run on it.
	} else {
		if !(hostSilent(err) || released(err, out)) || r.version(ctx, versionLeaseExpires) == workflow.DefaultVersion {
			r.slots.release(ctx, lease)
		}
		r.slots.held(ctx, leased)
		r.slots.releaseHost(ctx)
	}
	if err == nil {
		// A completed attempt ends on its final checkpoint: all its time counts.
		r.st.Budget.Preserve(out.AgentSeconds)
		r.agentImage = out.Image
		rec.End, rec.Detail = string(out.StoppedBy), exitText(out)
		return out, false, nil
	}
	rec.End, rec.Detail = "lost", errText(err)
	if _, ok := handedBack(err); ok {
		rec.End = "handed_back"
	}
	if !isInfraLoss(err) {
		rec.End = "failed"
		return nil, false, fmt.Errorf("agent attempt %d: %s", attempt, errText(err))
	}
	wall := workflow.Now(ctx).Sub(started)
	before := r.st.Budget
	r.st.Budget.Crash(ranTo(err, base, wall, p.HeartbeatTimeout), wall.Seconds(), base)
	rec.LostS = r.st.Budget.LostS - before.LostS
	r.metrics(ctx).Timer(MetricLost).Record(seconds(r.st.Budget.LostS - before.LostS))
	r.metrics(ctx).Timer(MetricInfraWait).Record(seconds(r.st.Budget.InfraWaitS - before.InfraWaitS))
	workflow.GetLogger(ctx).Warn("agent attempt lost; resuming from the last checkpoint",
		"attempt", attempt, "error", errText(err), "lost_s", r.st.Budget.LostS)
	return nil, true, nil
}

// ranTo is how far a lost attempt got, in agent seconds: exact when the
// activity saw its agent stopped and handed the attempt back, else
// estimated from its last heartbeat and the time it took to be noticed.
func ranTo(err error, base float64, wall, hbTimeout time.Duration) float64 {
	if p, ok := handedBack(err); ok {
		return max(base, p.AgentSeconds)
	}
	var hb activities.Progress
	var te *temporal.TimeoutError
	if errors.As(err, &te) && te.HasLastHeartbeatDetails() && te.LastHeartbeatDetails(&hb) == nil {
		return budget.RanTo(base, hb.AgentSeconds, wall, hbTimeout)
	}
	return budget.RanTo(base, 0, wall, hbTimeout)
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

// hostSilent tells an attempt lost because its host stopped answering
// (a crash, a partition): a release sent there would wait for nobody,
// and the host's lease expires by itself when its holder stops renewing.
func hostSilent(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && (te.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT || te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START)
}

// released tells an attempt that gave its lease back itself.
func released(err error, res *activities.AgentResult) bool {
	if err == nil {
		return res.Released
	}
	p, ok := handedBack(err)
	return ok && p.Released
}

// handedBack is the progress an attempt reported when it handed itself
// back (its agent stopped under it and checkpointed).
func handedBack(err error) (activities.Progress, bool) {
	var ae *temporal.ApplicationError
	var p activities.Progress
	ok := errors.As(err, &ae) && ae.Type() == activities.ErrAgentKilled && ae.HasDetails() && ae.Details(&p) == nil
	return p, ok
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
