// The activity catalogue: every activity the workflows call, with its options.

package workflows

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/attempt"
	"github.com/mlrb/mlrb/activities/evaluation"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/activities/records"
	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/results/resume"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// The activity catalogue: every activity the workflows call, each with
// its wire name (recorded histories name it: never change one), the
// queues that serve it, the builder of its options and its typed input
// and result. Workflows call the entries (runAgent.call(ctx, args, in));
// workers register them (Register, RegisterShared, RegisterHost).
var (
	resolveTask = activityOf[*records.Tasks, activities.ResolveInput, *activities.ResolvedTask]{
		name: activities.ResolveTaskName, on: onShared, options: quickOptions, lean: &localQuick, of: setTasks, fn: (*records.Tasks).ResolveTask}
	resolveAgents = activityOf[*records.Tasks, []agents.Definition, map[string]string]{
		name: activities.ResolveAgentsName, on: onShared, options: quickOptions, of: setTasks, fn: (*records.Tasks).ResolveAgents}
	loadCheckpoint = activityOf[*records.Records, activities.CheckpointSource, *activities.CheckpointRef]{
		name: activities.LoadCheckpointName, on: onShared, options: quickOptions, of: setRecords, fn: (*records.Records).LoadCheckpoint}
	provisionHost = activityOf[*records.Fleet, activities.HostRequest, *activities.ProvisionedHost]{
		name: activities.ProvisionHostName, on: onShared, options: provisionOptions, of: setFleet, fn: (*records.Fleet).ProvisionHost}
	releaseHost = actionOf[*records.Fleet, activities.ProvisionedHost]{
		name: activities.ReleaseHostName, on: onShared, options: hostReleaseOptions, of: setFleet, fn: (*records.Fleet).ReleaseHost}
	// A provisioned host's slot is leased on its own queue.
	acquireLease = activityOf[*host.Leases, activities.LeaseRequest, *activities.Lease]{
		name: activities.AcquireLeaseName, on: onShared | onHost, options: leaseOptions, of: setLeases, fn: (*host.Leases).AcquireLease}
	releaseLease = actionOf[*host.Leases, activities.Lease]{
		name: activities.ReleaseLeaseName, on: onHost, options: releaseOptions, of: setLeases, fn: (*host.Leases).ReleaseLease}
	runAgent = activityOf[*attempt.Attempts, activities.AgentInput, *activities.AgentResult]{
		name: activities.RunAgentName, on: onHost, options: agentOptions, of: setAttempts, fn: (*attempt.Attempts).RunAgent}
	evaluate = activityOf[*evaluation.Evaluations, activities.EvalInput, *activities.EvalResult]{
		name: activities.EvaluateName, on: onShared | onHost, options: evalOptions, of: setEvaluations, fn: (*evaluation.Evaluations).Evaluate}
	pickMarks = activityOf[*evaluation.Evaluations, activities.MarksInput, []runs.Mark]{
		name: activities.PickMarksName, on: onShared, options: quickOptions, lean: &localQuick, of: setEvaluations, fn: (*evaluation.Evaluations).PickMarks}
	storeResult = actionOf[*records.Records, activities.StoreResultInput]{
		name: activities.StoreResultName, on: onShared, options: storeOptions, lean: &localStore, of: setRecords, fn: (*records.Records).StoreResult}
	storeAnchor = actionOf[*records.Records, activities.StoreAnchorInput]{
		name: activities.StoreAnchorName, on: onShared, options: storeOptions, of: setRecords, fn: (*records.Records).StoreAnchor}
	readPlan = activityOf[*records.Records, activities.ReadPlanInput, map[string]resume.Entry]{
		name: activities.ReadPlanName, on: onShared, options: quickOptions, of: setRecords, fn: (*records.Records).ReadPlan}
	awaitRuns = activityOf[*records.Records, []string, []runs.End]{
		name: activities.AwaitRunsName, on: onShared, options: awaitOptions, of: setRecords, fn: (*records.Records).AwaitRuns}
	aggregateResults = activityOf[*records.Records, activities.AggregateResultsInput, *activities.AggregateResult]{
		name: activities.AggregateResultsName, on: onShared, options: aggregateOptions, of: setRecords, fn: (*records.Records).AggregateResults}
	// aggregate is the leaderboard of version 0 benchmarks (benchmarkV0).
	aggregate = activityOf[*records.Records, activities.AggregateInput, []string]{
		name: activities.AggregateName, on: onShared, options: aggregateOptions, of: setRecords, fn: (*records.Records).Aggregate}
)

// catalogue lists the entries for registration.
var catalogue = []entry{resolveTask, resolveAgents, loadCheckpoint, provisionHost, releaseHost, acquireLease, releaseLease,
	runAgent, evaluate, pickMarks, storeResult, storeAnchor, readPlan, awaitRuns, aggregateResults, aggregate}

// served says which task queues serve an activity.
type served int

const (
	// onShared: the shared queue, which any worker polls.
	onShared served = 1 << iota
	// onHost: the queue of the host that holds the lease (agents,
	// evaluations and releases are pinned to it).
	onHost
)

// callArgs are what an activity's options are built from; each builder
// (options.go) reads the fields it needs.
type callArgs struct {
	pol Policy
	// lease is the slot the activity runs on (an attempt, a release).
	lease activities.Lease
	// hostQueue is a leased or provisioned host's queue ("": the shared one).
	hostQueue string
	ledger    budget.Account
	// bytes is the checkpoint the activity restores, which sizes its timeout.
	bytes int64
	// evalWork is how long an evaluation's evaluator runs may take in all.
	evalWork time.Duration
	// paused is how long a person's attempt may spend paused.
	paused time.Duration
}

// entry is a catalogue entry as a worker registers it.
type entry interface {
	register(r Registry, s *Set, on served)
}

// The receivers of the set, by concern.
func setTasks(s *Set) *records.Tasks                { return s.Tasks }
func setRecords(s *Set) *records.Records            { return s.Records }
func setLeases(s *Set) *host.Leases                 { return s.Leases }
func setFleet(s *Set) *records.Fleet                { return s.Fleet }
func setAttempts(s *Set) *attempt.Attempts          { return s.Attempts }
func setEvaluations(s *Set) *evaluation.Evaluations { return s.Evaluations }

// activityOf is an activity with a result, a method of receiver R.
type activityOf[R, In, Out any] struct {
	name    string
	on      served
	options func(workflow.Context, callArgs) workflow.Context
	// lean, when set, makes the entry a local activity of a lean run
	// (runEnv.isLean), with these options: run chooses.
	lean *workflow.LocalActivityOptions
	of   func(*Set) R
	fn   func(R, context.Context, In) (Out, error)
}

// run calls the activity as the run's code path says: local in a lean
// run when the entry allows it, else scheduled on its queue.
func (d activityOf[R, In, Out]) run(ctx workflow.Context, env runEnv, args callArgs, in In) (Out, error) {
	if d.lean != nil && env.isLean() {
		return d.callLocal(ctx, *d.lean, in)
	}
	return d.call(ctx, args, in)
}

// call runs the activity and waits for its result.
func (d activityOf[R, In, Out]) call(ctx workflow.Context, args callArgs, in In) (Out, error) {
	var out Out
	err := d.start(ctx, args, in).Get(ctx, &out)
	return out, err
}

// callLocal runs the activity as a local activity of the worker that runs
// the workflow (the entry must be served on the shared queue, where every
// workflow worker registers it): no task of its own to dispatch and
// record, its result a marker in the workflow task that called it.
func (d activityOf[R, In, Out]) callLocal(ctx workflow.Context, opts workflow.LocalActivityOptions, in In) (Out, error) {
	var out Out
	err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, opts), d.name, in).Get(ctx, &out)
	return out, err
}

// start schedules the activity; the future's result is an Out.
func (d activityOf[R, In, Out]) start(ctx workflow.Context, args callArgs, in In) workflow.Future {
	return workflow.ExecuteActivity(d.options(ctx, args), d.name, in)
}

func (d activityOf[R, In, Out]) register(r Registry, s *Set, on served) {
	if d.on&on == 0 {
		return
	}
	of, fn := d.of, d.fn
	r.RegisterActivityWithOptions(func(ctx context.Context, in In) (Out, error) { return fn(of(s), ctx, in) }, activity.RegisterOptions{Name: d.name})
}

// actionOf is an activity without a result, a method of receiver R.
type actionOf[R, In any] struct {
	name    string
	on      served
	options func(workflow.Context, callArgs) workflow.Context
	// lean: as activityOf's.
	lean *workflow.LocalActivityOptions
	of   func(*Set) R
	fn   func(R, context.Context, In) error
}

// run calls the activity local or scheduled (activityOf.run).
func (d actionOf[R, In]) run(ctx workflow.Context, env runEnv, args callArgs, in In) error {
	if d.lean != nil && env.isLean() {
		return d.callLocal(ctx, *d.lean, in)
	}
	return d.call(ctx, args, in)
}

// call runs the activity and waits for it to end.
func (d actionOf[R, In]) call(ctx workflow.Context, args callArgs, in In) error {
	return workflow.ExecuteActivity(d.options(ctx, args), d.name, in).Get(ctx, nil)
}

// callLocal runs the activity as a local activity (activityOf.callLocal).
func (d actionOf[R, In]) callLocal(ctx workflow.Context, opts workflow.LocalActivityOptions, in In) error {
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, opts), d.name, in).Get(ctx, nil)
}

func (d actionOf[R, In]) register(r Registry, s *Set, on served) {
	if d.on&on == 0 {
		return
	}
	of, fn := d.of, d.fn
	r.RegisterActivityWithOptions(func(ctx context.Context, in In) error { return fn(of(s), ctx, in) }, activity.RegisterOptions{Name: d.name})
}
