// The run's attempt loop: lost attempts and how far they got.

package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// ranTo is how far a lost attempt got, in agent seconds: exact when the
// activity saw its agent stopped and handed the attempt back, else
// estimated from its last heartbeat and the time it took to be noticed.
func ranTo(err error, base float64, wall, hbTimeout time.Duration) float64 {
	if p, ok := handedBack(err); ok {
		return max(base, p.AgentSeconds)
	}
	var hb activities.Heartbeat
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
func handedBack(err error) (activities.Heartbeat, bool) {
	var ae *temporal.ApplicationError
	var p activities.Heartbeat
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

// attemptLoop is the run's agent: attempts of lease, restore and agent
// until the agent ends or the infra-attempt limit is hit, and each
// attempt's record for the result.
type attemptLoop struct {
	c      *runCore
	slots  *slots
	usage  *usageState
	curve  *curveState
	intake *intake
	person *person
	// attempts are the attempts' records; image is the image the last
	// completed attempt ran, by digest.
	attempts []runs.AttemptRecord
	image    string
	// ranTo is how far each lost attempt was reckoned to have run (from
	// its last heartbeat heard), and resumedFrom the agent time the
	// current attempt took over from a checkpoint the run had not heard
	// of: together they correct the ledger once that checkpoint arrives.
	ranTo       map[int]float64
	resumedFrom float64
}

// runAttempts runs the agent, re-leasing and resuming after infra losses.
func (al *attemptLoop) runAttempts(ctx workflow.Context) (*activities.AgentResult, error) {
	p := al.c.pol
	first := al.c.st.Attempt // attempts of an earlier execution, on a continued run
	for attempt := first + 1; attempt <= first+p.MaxInfraAttempts; attempt++ {
		al.c.st.Attempt = attempt
		if attempt > 1 {
			al.c.setPhase(ctx, runs.PhaseRecovering)
		}
		lease, again, err := al.leaseFor(ctx, attempt)
		if err != nil {
			return nil, err
		}
		if again {
			continue
		}
		leased := workflow.Now(ctx)
		if al.c.st.CancelRequested {
			al.slots.release(ctx, lease)
			al.slots.held(ctx, leased)
			al.slots.releaseHost(ctx)
			return &activities.AgentResult{StoppedBy: activities.StopCanceled}, nil
		}
		res, lost, err := al.runAgent(ctx, attempt, lease, leased)
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
func (al *attemptLoop) leaseFor(ctx workflow.Context, attempt int) (lease activities.Lease, again bool, err error) {
	leasing := func() { al.c.setPhase(ctx, runs.PhaseLeasing) }
	if !al.slots.asksHere() {
		leasing()
	}
	leaseStart := workflow.Now(ctx)
	al.c.st.LeasingSince = leaseStart
	queue, err := al.slots.provision(ctx, "", attempt, 0)
	if err != nil {
		return lease, false, fmt.Errorf("no host for attempt %d: %s", attempt, errText(err))
	}
	req := activities.LeaseRequest{RunID: al.c.st.RunID, Attempt: attempt, GPUCount: al.c.spec.Spec.Resources.GPUCount, GPUType: al.c.spec.Spec.Resources.GPUType}
	got, err := al.slots.acquire(ctx, req, queue, leasing)
	if err != nil {
		provisioned := al.c.st.Host != nil
		al.slots.releaseHost(ctx)
		// A provisioned host that never served its lease (it did not
		// boot, its worker died) is an infra loss: another is
		// provisioned, up to the attempt limit.
		if provisioned && al.c.env.version(ctx, versionReprovision) == 1 {
			al.c.st.LeasingSince = time.Time{}
			al.c.st.Budget.Wait(workflow.Now(ctx).Sub(leaseStart).Seconds())
			workflow.GetLogger(ctx).Warn("the provisioned host never served its lease; provisioning another", "attempt", attempt, "error", errText(err))
			return lease, true, nil
		}
		return lease, false, fmt.Errorf("no GPU lease for attempt %d: %s", attempt, errText(err))
	}
	lease = *got
	al.c.st.LeasingSince = time.Time{}
	wait := workflow.Now(ctx).Sub(leaseStart)
	al.slots.leaseWaitS = wait.Seconds()
	al.c.st.Budget.Wait(wait.Seconds())
	al.c.metrics(ctx).Timer(MetricLeaseWait).Record(wait)
	al.c.metrics(ctx).Timer(MetricInfraWait).Record(wait)
	return lease, false, nil
}

// tookOver corrects the ledger when the current attempt takes over a
// checkpoint an earlier, lost attempt committed that the run never heard
// of (its signals were lost with the server or the worker): that attempt
// ran at least to the checkpoint, so the time booked as lost past the
// estimate's last checkpoint, and as infra wait, was partly the agent's
// kept work, and the current attempt starts from there.
func (al *attemptLoop) tookOver(c activities.CheckpointRef, usedBefore float64) {
	if c.Attempt >= al.c.st.Attempt || c.AgentSeconds <= usedBefore {
		return
	}
	al.resumedFrom = c.AgentSeconds
	for i := range al.attempts {
		rec := &al.attempts[i]
		reached, lost := al.ranTo[rec.N]
		if rec.N != c.Attempt || !lost {
			continue
		}
		kept := max(0, reached-c.AgentSeconds)
		b := &al.c.st.Budget
		b.LostS = max(0, b.LostS-(rec.LostS-kept))
		b.InfraWaitS = max(0, b.InfraWaitS-max(0, c.AgentSeconds-reached))
		rec.LostS, rec.ToS = kept, c.AgentSeconds
	}
}

// runAgent runs one attempt of the agent on its lease and gives the lease
// and the host back. An attempt lost to the infrastructure books its time
// (refunding what ran past the last checkpoint) and says so (lost): the
// next attempt resumes; any error ends the run.
func (al *attemptLoop) runAgent(ctx workflow.Context, attempt int, lease activities.Lease, leased time.Time) (res *activities.AgentResult, lost bool, err error) {
	p := al.c.pol
	al.c.setPhase(ctx, runs.PhaseRunning)
	started := workflow.Now(ctx)
	al.c.st.AttemptStartedAt = started
	base := al.c.st.Budget.UsedS
	in := activities.AgentInput{
		RunID: al.c.st.RunID, Attempt: attempt, Task: al.c.spec.Spec, Agent: al.c.in.Agent, Seed: al.c.in.Seed,
		LLMProvider: al.c.in.LLMProvider, Image: al.c.image(), Secrets: al.c.in.Secrets, AgentDef: al.c.in.AgentDef, Lease: lease, Budget: al.c.st.Budget,
		Resume: al.c.last, NextSeq: al.c.nextSeq(), Interval: al.c.interval(), Grace: p.Grace, LLMBudget: al.usage.llmBudget(), Marks: al.curve.curveMarks(),
		KeepLease: al.c.env.isLean() && al.c.st.Host == nil, LastInResult: true, ReplayOf: al.c.in.ReplayOf,
	}
	al.person.input(&in)
	al.c.st.AttemptHost = lease.HostID
	defer func() { al.c.st.AttemptHost = "" }()
	var bytes int64
	if al.c.last != nil {
		bytes = al.c.last.Bytes // to restore, and about as much to save
	}
	// A person's attempt may also spend a few release_afters paused.
	paused := time.Duration(activities.MaxPausesPerAttempt+1) * in.ReleaseAfter
	out, err := runAgent.call(ctx, callArgs{pol: p, lease: lease, ledger: al.c.st.Budget, bytes: bytes, paused: paused}, in)
	al.intake.drain(ctx, out)
	al.person.took(out)
	rec := runs.AttemptRecord{N: attempt, Host: lease.HostID, LeaseWaitS: al.slots.leaseWaitS, LeasedAt: leased, FromS: max(base, al.resumedFrom)}
	al.resumedFrom = 0
	defer func() {
		rec.EndedAt, rec.ToS = workflow.Now(ctx), al.c.st.Budget.UsedS
		al.attempts = append(al.attempts, rec)
	}()
	// A lean run's evaluations run on the slot of an attempt that ended.
	if kept := err == nil && !out.Released && al.slots.keepForScoring(lease, leased); !kept {
		if !(hostSilent(err) || released(err, out)) || al.c.env.version(ctx, versionLeaseExpires) == workflow.DefaultVersion {
			al.slots.release(ctx, lease)
		}
		al.slots.held(ctx, leased)
		al.slots.releaseHost(ctx)
	}
	if err == nil {
		// A completed attempt ends on its final checkpoint: all its time counts.
		al.c.st.Budget.Preserve(out.AgentSeconds)
		al.image = out.Image
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
	rec.LostS = al.bookLoss(ctx, attempt, err, base, workflow.Now(ctx).Sub(started))
	return nil, true, nil
}

// bookLoss books a lost attempt that started at base agent seconds and
// ran wall: what it ran past the last checkpoint is lost, the rest infra
// wait. It returns the time lost.
func (al *attemptLoop) bookLoss(ctx workflow.Context, attempt int, err error, base float64, wall time.Duration) float64 {
	before := al.c.st.Budget
	reached := ranTo(err, base, wall, al.c.pol.HeartbeatTimeout)
	al.c.st.Budget.Crash(reached, wall.Seconds(), base)
	if al.ranTo == nil {
		al.ranTo = map[int]float64{}
	}
	al.ranTo[attempt] = reached
	lost := al.c.st.Budget.LostS - before.LostS
	al.c.metrics(ctx).Timer(MetricLost).Record(seconds(lost))
	al.c.metrics(ctx).Timer(MetricInfraWait).Record(seconds(al.c.st.Budget.InfraWaitS - before.InfraWaitS))
	workflow.GetLogger(ctx).Warn("agent attempt lost; resuming from the last checkpoint",
		"attempt", attempt, "error", errText(err), "lost_s", al.c.st.Budget.LostS)
	return lost
}

// result: the agent image the attempts ran and each attempt's record.
func (al *attemptLoop) result(res *runs.Result) {
	res.AgentImage, res.AttemptLog = al.image, al.attempts
}
