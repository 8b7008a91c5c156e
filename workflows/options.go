// Activity options: timeouts and retry policies.

package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/results/controls"
	"github.com/mlrb/mlrb/internal/run/budget"
)

// Activity options, one builder per kind of activity, each with the
// reasons for its timeouts and retries.

// quickTimeout bounds the activities that only read a catalog, a
// manifest or a lease table: seconds of work, so a minute of silence
// means a lost worker.
const quickTimeout = 30 * time.Second

// quickOptions: resolving a task and reading a checkpoint's manifest. A
// few tries ride out a store or worker that blips; a bad task is final.
func quickOptions(ctx workflow.Context, _ callArgs) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: quickTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5, NonRetryableErrorTypes: []string{activities.ErrBadTask}},
	})
}

// localQuick: quickOptions for a local activity (a lean run's task
// resolution and mark picking).
var localQuick = workflow.LocalActivityOptions{
	StartToCloseTimeout: quickTimeout, ScheduleToCloseTimeout: 5 * quickTimeout,
	RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5, NonRetryableErrorTypes: []string{activities.ErrBadTask}},
}

// localLease: a lease asked of the worker running the run, once (the
// run then waits for one through the queue, sharedLeaseOptions).
var localLease = workflow.LocalActivityOptions{StartToCloseTimeout: quickTimeout, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}}

// localStore: storeOptions for a local activity (a lean run's result).
var localStore = workflow.LocalActivityOptions{
	StartToCloseTimeout: quickTimeout, ScheduleToCloseTimeout: time.Hour,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
}

// sharedLeaseOptions: a full host answers NoCapacity and the lease is tried
// again, backing off to every 30 s, until LeaseTimeout (the longest a run
// waits for a GPU slot in all) runs out.
func sharedLeaseOptions(ctx workflow.Context, p Policy) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: p.LeaseTimeout,
		StartToCloseTimeout:    quickTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 1.5, MaximumInterval: 30 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrBadTask},
		},
	})
}

// provisionOptions: launching a job or an instance fails for a while
// when the cluster is busy or the zone out of capacity; it is tried again,
// backing off to every 5 minutes, as long as a run waits for a GPU in all
// (LeaseTimeout). A bad request is final.
func provisionOptions(ctx workflow.Context, a callArgs) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		ScheduleToCloseTimeout: a.pol.LeaseTimeout,
		StartToCloseTimeout:    2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 5 * time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrBadTask},
		},
	})
}

// bootOptions: the lease on a provisioned host waits for its worker to
// boot and poll, BootTimeout at most: a job or instance that never
// serves (a node failure, a worker that cannot start) is given up on in
// minutes, not the lease timeout's day.
func bootOptions(ctx workflow.Context, p Policy) workflow.Context {
	o := workflow.GetActivityOptions(sharedLeaseOptions(ctx, p))
	o.ScheduleToStartTimeout = p.BootTimeout
	return workflow.WithActivityOptions(ctx, o)
}

// leaseOptions: on the shared queue, any static host may answer; on a
// provisioned host's queue, the lease waits for its worker to boot.
func leaseOptions(ctx workflow.Context, a callArgs) workflow.Context {
	if a.hostQueue == "" {
		return sharedLeaseOptions(ctx, a.pol)
	}
	return workflow.WithTaskQueue(bootOptions(ctx, a.pol), a.hostQueue)
}

// agentOptions: the attempt runs on the leased host's queue. A host that
// never comes back is noticed by the heartbeat timeout, or before the
// start by the schedule-to-start timeout (a few heartbeat timeouts and a
// minute: time for a restarted worker to poll again); either way the run
// leases again. The start-to-close timeout is only a safety net: the
// supervisor's own deadlines end the agent well before it. The workflow
// decides what follows a lost attempt, so the SDK never retries it, and
// waits for a canceled attempt to stop its agent.
func agentOptions(ctx workflow.Context, a callArgs) workflow.Context {
	p, lease, l, bytes := a.pol, a.lease, a.ledger, a.bytes
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              lease.HostQueue,
		ScheduleToStartTimeout: 5*p.HeartbeatTimeout + time.Minute,
		StartToCloseTimeout:    l.SafetyTimeout(p.Grace, bytes) + a.paused,
		HeartbeatTimeout:       p.HeartbeatTimeout,
		WaitForCancellation:    true,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// hostReleaseOptions: giving a provisioned host back waits until it is
// gone (a Slurm job's allocation over), which takes as long as its
// worker's hand-back; the activity heartbeats meanwhile. A host a run
// fails to give back is the reaper's.
func hostReleaseOptions(ctx workflow.Context, _ callArgs) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    quickTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
}

// releaseOptions: the release goes to the host that holds the lease; a
// lease on a dead host died with it, so a minute without a worker ends
// the try.
func releaseOptions(ctx workflow.Context, a callArgs) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              a.lease.HostQueue,
		ScheduleToStartTimeout: time.Minute,
		StartToCloseTimeout:    quickTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 3},
	})
}

// evalMinHeartbeat keeps an evaluation's heartbeat timeout above its own
// heartbeat pace (every 5 s) even under a short agent heartbeat timeout.
const evalMinHeartbeat = 30 * time.Second

// evalOptions: one evaluation may run its evaluators (evalWork), plus the
// restores of the final checkpoint (bytes) and of a control's model (at
// most controls.MaxBytes, whatever the run's size), each at a
// slow pace, and a minute to read results; failures are retried with
// backoff per policy, except a missing model or a bad task. On a leased
// host's queue (hostQueue), a host that never picks it up is given up on
// like an agent's; the run then waits for retry-eval, which leases again.
func evalOptions(ctx workflow.Context, a callArgs) workflow.Context {
	p, bytes, hostQueue := a.pol, a.bytes, a.hostQueue
	var toStart time.Duration
	if hostQueue != "" {
		toStart = 5*p.HeartbeatTimeout + time.Minute
	}
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              hostQueue,
		ScheduleToStartTimeout: toStart,
		StartToCloseTimeout:    a.evalWork + budget.Transfer(bytes) + budget.Transfer(controls.MaxBytes) + time.Minute,
		HeartbeatTimeout:       max(p.HeartbeatTimeout, evalMinHeartbeat),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			MaximumAttempts:        int32(p.EvalAttempts),
			NonRetryableErrorTypes: []string{activities.ErrNoModel, activities.ErrBadTask},
		},
	})
}

// evalWork is how long evaluation in may run its evaluators
// (in.EvaluatorRuns: two, or three when a final evaluation scores both
// splits in its first run), each up to its run timeout (the
// evaluation's, twice with a check stage).
func evalWork(in activities.EvalInput) time.Duration {
	return time.Duration(in.EvaluatorRuns()) * in.RunTimeout()
}

// aggregateOptions: computing and storing a leaderboard takes seconds;
// ten tries ride out a store outage.
func aggregateOptions(ctx workflow.Context, _ callArgs) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 10}})
}

// awaitOptions: AwaitRuns waits as long as a run may last (its budget,
// evaluation retries and the wait for a retry-evaluation), heartbeating;
// a lost worker is noticed within a minute and the wait starts again.
func awaitOptions(ctx workflow.Context, _ callArgs) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * 24 * time.Hour,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
}

// storeOptions: storing a result takes a second; retries ride out a
// store outage of up to an hour.
func storeOptions(ctx workflow.Context, _ callArgs) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: quickTimeout, ScheduleToCloseTimeout: time.Hour,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
}
