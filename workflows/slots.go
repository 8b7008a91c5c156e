// slots is the run's hold on hosts and their GPU slots.

package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// slots is the run's hold on hosts and their GPU slots: the provisioned
// host, the leases its steps take, the slot a lean run's evaluations
// share (held from the agent's end or the final evaluation to the last
// mark, on static hosts: a provisioned host's lifetime is sized for the
// step it was provisioned for), and the time hosts were held for it.
type slots struct {
	c *runCore
	// heldS is the wall time GPU hosts were held for the run: from a
	// provisioned host's start (boot and idle included), or a static
	// host's lease, to its release.
	heldS float64
	// hostAt is when the current provisioned host was obtained.
	hostAt time.Time
	// leaseWaitS is the last lease's wait, for its attempt's record.
	leaseWaitS float64
	// scoring is the slot the run's evaluations share.
	scoring *heldLease
}

// heldLease is a lease the run holds across activities, and since when.
type heldLease struct {
	lease  activities.Lease
	leased time.Time
}

// provision obtains a host for an attempt (role "") or an evaluation (or
// a curve's, work long) when the run's policy provisions hosts, and returns the queue the lease
// is taken on: that host's, or "" for the shared queue where any static
// host may answer. The host is in the run's state from the moment it
// exists, so that it is given back whatever happens next.
func (s *slots) provision(ctx workflow.Context, role string, n int, work time.Duration) (string, error) {
	if s.c.pol.Provision == "" {
		return "", nil
	}
	res := s.c.spec.Spec.Resources
	left := time.Duration(s.c.st.Budget.Left() * float64(time.Second))
	if role != "" {
		left = work
	}
	if s.c.last != nil {
		left += 2 * budget.Transfer(s.c.last.Bytes) // its restore and final save, at a slow pace
	}
	req := activities.HostRequest{Kind: s.c.pol.Provision, RunID: s.c.st.RunID, Attempt: n, Role: role, GPUType: res.GPUType, GPUCount: res.GPUCount, TimeLimit: left + s.c.pol.ProvisionMargin}
	h, err := provisionHost.call(ctx, callArgs{pol: s.c.pol}, req)
	if err != nil {
		return "", err
	}
	s.c.st.Host, s.hostAt = h, workflow.Now(ctx)
	return h.HostQueue, nil
}

// releaseHost gives the provisioned host back (cancels its job), if any.
func (s *slots) releaseHost(ctx workflow.Context) {
	if s.c.st.Host == nil {
		return
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	_ = releaseHost.call(dctx, callArgs{}, *s.c.st.Host)
	s.c.st.Host = nil
}

// release gives the lease back, best effort: a lease on a dead host died
// with it.
func (s *slots) release(ctx workflow.Context, lease activities.Lease) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	_ = releaseLease.call(dctx, callArgs{lease: lease}, lease)
}

// held counts the time a host was held for the run, from since (a
// static lease's start) or from when the provisioned host was obtained.
func (s *slots) held(ctx workflow.Context, since time.Time) {
	if s.c.st.Host != nil && !s.hostAt.IsZero() {
		since = s.hostAt
	}
	s.heldS += workflow.Now(ctx).Sub(since).Seconds()
}

// leaseSlot leases a slot for role's nth use (provisioning its host
// first); done gives back what was obtained and counts the host's time.
func (s *slots) leaseSlot(ctx workflow.Context, role string, n int, work time.Duration) (*activities.Lease, func(), error) {
	req := activities.LeaseRequest{RunID: s.c.st.RunID, Attempt: n, Role: role,
		GPUCount: s.c.spec.Spec.Resources.GPUCount, GPUType: s.c.spec.Spec.Resources.GPUType}
	s.c.st.LeasingSince = workflow.Now(ctx)
	defer func() { s.c.st.LeasingSince = time.Time{} }()
	queue, err := s.provision(ctx, role, n, work)
	if err != nil {
		return nil, func() {}, err
	}
	lease, err := s.acquire(ctx, req, queue, func() {})
	leased := workflow.Now(ctx)
	return lease, func() {
		if err == nil {
			s.release(ctx, *lease)
		}
		s.held(ctx, leased)
		s.releaseHost(ctx)
	}, err
}

// asksHere tells whether the run first asks the worker running it for a
// slot (versionLeanRun's path 3, static hosts: a provisioned host's slot
// is leased on its own queue).
func (s *slots) asksHere() bool { return s.c.env.leasesHereFirst() && s.c.pol.Provision == "" }

// acquire leases a slot for req on queue ("": the shared one, where any
// static host may answer). When the run asksHere, the worker running it
// is asked first, as a local activity that does not wait: a slot free on
// its host is taken with no task to dispatch and no workflow task to
// follow (the eager dispatch of the activity on the shared queue went to
// that worker too). Otherwise waiting is called (the caller's phase) and
// the lease waits through the queue, as before. A slot taken by a
// workflow task that never completed (its worker lost) is the same
// token's when the task is retried on that host, and expires with the
// host's lease TTL elsewhere, as a lost eager activity's did.
func (s *slots) acquire(ctx workflow.Context, req activities.LeaseRequest, queue string, waiting func()) (*activities.Lease, error) {
	if s.asksHere() {
		now := req
		now.AtOnce = true
		if l, err := acquireLease.callLocal(ctx, localLease, now); err == nil {
			return l, nil
		}
	}
	waiting()
	return acquireLease.call(ctx, callArgs{pol: s.c.pol, hostQueue: queue}, req)
}

// keepForScoring keeps lease, held since leased, for the run's
// evaluations; false when the run does not share slots (not lean, or a
// provisioned host).
func (s *slots) keepForScoring(lease activities.Lease, leased time.Time) bool {
	if !s.c.env.isLean() || s.c.st.Host != nil {
		return false
	}
	s.scoring = &heldLease{lease: lease, leased: leased}
	return true
}

// scoringLease is the shared slot, if the run holds one.
func (s *slots) scoringLease() *activities.Lease {
	if s.scoring == nil {
		return nil
	}
	l := s.scoring.lease
	return &l
}

// releaseScoring gives the shared slot back and books the time it was
// held.
func (s *slots) releaseScoring(ctx workflow.Context) {
	if h := s.dropScoring(ctx); h != nil {
		s.release(ctx, h.lease)
	}
}

// dropScoring forgets the shared slot (an evaluation gave it back
// itself) and books the time it was held; it returns what it forgot.
func (s *slots) dropScoring(ctx workflow.Context) *heldLease {
	h := s.scoring
	if h == nil {
		return nil
	}
	s.scoring = nil
	s.held(ctx, h.leased)
	return h
}

// result: the GPU hours billed for the slots the run held.
func (s *slots) result(res *runs.Result) {
	res.Cost.BilledGPUHours = s.heldS * float64(s.c.spec.Spec.Resources.GPUCount) / 3600
}
