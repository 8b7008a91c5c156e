package workflows

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/budget"
	"github.com/mlrb/mlrb/internal/resume"
	"github.com/mlrb/mlrb/internal/runs"
)

// The activity catalogue: every activity the workflows call, each with
// its wire name (recorded histories name it: never change one), the
// queues that serve it, the builder of its options and its typed input
// and result. Workflows call the entries (runAgent.call(ctx, args, in));
// workers register them (Register, RegisterShared, RegisterHost).
var (
	resolveTask = activityOf[activities.ResolveInput, *activities.ResolvedTask]{
		name: activities.ResolveTaskName, on: onShared, options: quickOptions, fn: (*activities.Activities).ResolveTask}
	resolveAgents = activityOf[[]agents.Definition, map[string]string]{
		name: activities.ResolveAgentsName, on: onShared, options: quickOptions, fn: (*activities.Activities).ResolveAgents}
	loadCheckpoint = activityOf[activities.CheckpointSource, *activities.CheckpointRef]{
		name: activities.LoadCheckpointName, on: onShared, options: quickOptions, fn: (*activities.Activities).LoadCheckpoint}
	provisionHost = activityOf[activities.HostRequest, *activities.ProvisionedHost]{
		name: activities.ProvisionHostName, on: onShared, options: provisionOptions, fn: (*activities.Activities).ProvisionHost}
	releaseHost = actionOf[activities.ProvisionedHost]{
		name: activities.ReleaseHostName, on: onShared, options: quickOptions, fn: (*activities.Activities).ReleaseHost}
	// A provisioned host's slot is leased on its own queue.
	acquireLease = activityOf[activities.LeaseRequest, *activities.Lease]{
		name: activities.AcquireLeaseName, on: onShared | onHost, options: leaseOptions, fn: (*activities.Activities).AcquireLease}
	releaseLease = actionOf[activities.Lease]{
		name: activities.ReleaseLeaseName, on: onHost, options: releaseOptions, fn: (*activities.Activities).ReleaseLease}
	runAgent = activityOf[activities.AgentInput, *activities.AgentResult]{
		name: activities.RunAgentName, on: onHost, options: agentOptions, fn: (*activities.Activities).RunAgent}
	evaluate = activityOf[activities.EvalInput, *activities.EvalResult]{
		name: activities.EvaluateName, on: onShared | onHost, options: evalOptions, fn: (*activities.Activities).Evaluate}
	pickMarks = activityOf[activities.MarksInput, []runs.Mark]{
		name: activities.PickMarksName, on: onShared, options: quickOptions, fn: (*activities.Activities).PickMarks}
	storeResult = actionOf[activities.StoreResultInput]{
		name: activities.StoreResultName, on: onShared, options: storeOptions, fn: (*activities.Activities).StoreResult}
	storeAnchor = actionOf[activities.StoreAnchorInput]{
		name: activities.StoreAnchorName, on: onShared, options: storeOptions, fn: (*activities.Activities).StoreAnchor}
	readPlan = activityOf[activities.ReadPlanInput, map[string]resume.Entry]{
		name: activities.ReadPlanName, on: onShared, options: quickOptions, fn: (*activities.Activities).ReadPlan}
	awaitRuns = activityOf[[]string, []runs.End]{
		name: activities.AwaitRunsName, on: onShared, options: awaitOptions, fn: (*activities.Activities).AwaitRuns}
	aggregateResults = activityOf[activities.AggregateResultsInput, *activities.AggregateResult]{
		name: activities.AggregateResultsName, on: onShared, options: aggregateOptions, fn: (*activities.Activities).AggregateResults}
	// aggregate is the leaderboard of version 0 benchmarks (benchmarkV0).
	aggregate = activityOf[activities.AggregateInput, []string]{
		name: activities.AggregateName, on: onShared, options: aggregateOptions, fn: (*activities.Activities).Aggregate}
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
	// timeout is the task's evaluation timeout.
	timeout time.Duration
}

// entry is a catalogue entry as a worker registers it.
type entry interface {
	register(r Registry, a *activities.Activities, on served)
}

// activityOf is an activity with a result.
type activityOf[In, Out any] struct {
	name    string
	on      served
	options func(workflow.Context, callArgs) workflow.Context
	fn      func(*activities.Activities, context.Context, In) (Out, error)
}

// call runs the activity and waits for its result.
func (d activityOf[In, Out]) call(ctx workflow.Context, args callArgs, in In) (Out, error) {
	var out Out
	err := d.start(ctx, args, in).Get(ctx, &out)
	return out, err
}

// callLocal runs the activity as a local activity of the worker that runs
// the workflow (the entry must be served on the shared queue, where every
// workflow worker registers it): no task of its own to dispatch and
// record, its result a marker in the workflow task that called it.
func (d activityOf[In, Out]) callLocal(ctx workflow.Context, opts workflow.LocalActivityOptions, in In) (Out, error) {
	var out Out
	err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, opts), d.name, in).Get(ctx, &out)
	return out, err
}

// start schedules the activity; the future's result is an Out.
func (d activityOf[In, Out]) start(ctx workflow.Context, args callArgs, in In) workflow.Future {
	return workflow.ExecuteActivity(d.options(ctx, args), d.name, in)
}

func (d activityOf[In, Out]) register(r Registry, a *activities.Activities, on served) {
	if d.on&on == 0 {
		return
	}
	fn := d.fn
	r.RegisterActivityWithOptions(func(ctx context.Context, in In) (Out, error) { return fn(a, ctx, in) }, activity.RegisterOptions{Name: d.name})
}

// actionOf is an activity without a result.
type actionOf[In any] struct {
	name    string
	on      served
	options func(workflow.Context, callArgs) workflow.Context
	fn      func(*activities.Activities, context.Context, In) error
}

// call runs the activity and waits for it to end.
func (d actionOf[In]) call(ctx workflow.Context, args callArgs, in In) error {
	return workflow.ExecuteActivity(d.options(ctx, args), d.name, in).Get(ctx, nil)
}

// callLocal runs the activity as a local activity (activityOf.callLocal).
func (d actionOf[In]) callLocal(ctx workflow.Context, opts workflow.LocalActivityOptions, in In) error {
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, opts), d.name, in).Get(ctx, nil)
}

func (d actionOf[In]) register(r Registry, a *activities.Activities, on served) {
	if d.on&on == 0 {
		return
	}
	fn := d.fn
	r.RegisterActivityWithOptions(func(ctx context.Context, in In) error { return fn(a, ctx, in) }, activity.RegisterOptions{Name: d.name})
}
