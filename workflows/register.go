package workflows

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
)

// WorkflowRegistry is what takes workflows: a worker, the test suite's
// environment, a replayer.
type WorkflowRegistry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Registry takes workflows and activities.
type Registry interface {
	WorkflowRegistry
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// RegisterWorkflows registers the workflows under their names.
func RegisterWorkflows(r WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(RunWorkflow, workflow.RegisterOptions{Name: RunWorkflowName})
	r.RegisterWorkflowWithOptions(BenchmarkWorkflow, workflow.RegisterOptions{Name: BenchmarkWorkflowName})
}

// RegisterShared registers what the shared task queue serves: the
// workflows and the activities any host may run.
func RegisterShared(r Registry, a *activities.Activities) {
	RegisterWorkflows(r)
	r.RegisterActivityWithOptions(a.ResolveTask, activity.RegisterOptions{Name: activities.ResolveTaskName})
	r.RegisterActivityWithOptions(a.AcquireLease, activity.RegisterOptions{Name: activities.AcquireLeaseName})
	r.RegisterActivityWithOptions(a.LoadCheckpoint, activity.RegisterOptions{Name: activities.LoadCheckpointName})
	r.RegisterActivityWithOptions(a.Evaluate, activity.RegisterOptions{Name: activities.EvaluateName})
	r.RegisterActivityWithOptions(a.Aggregate, activity.RegisterOptions{Name: activities.AggregateName})
	r.RegisterActivityWithOptions(a.AggregateResults, activity.RegisterOptions{Name: activities.AggregateResultsName})
	r.RegisterActivityWithOptions(a.StoreResult, activity.RegisterOptions{Name: activities.StoreResultName})
	r.RegisterActivityWithOptions(a.AwaitRuns, activity.RegisterOptions{Name: activities.AwaitRunsName})
	r.RegisterActivityWithOptions(a.ReadPlan, activity.RegisterOptions{Name: activities.ReadPlanName})
	r.RegisterActivityWithOptions(a.ProvisionHost, activity.RegisterOptions{Name: activities.ProvisionHostName})
	r.RegisterActivityWithOptions(a.ReleaseHost, activity.RegisterOptions{Name: activities.ReleaseHostName})
}

// RegisterHost registers what a host's own queue serves: the agent
// attempts and evaluations pinned to the host that holds their lease, and
// the release.
func RegisterHost(r Registry, a *activities.Activities) {
	r.RegisterActivityWithOptions(a.RunAgent, activity.RegisterOptions{Name: activities.RunAgentName})
	r.RegisterActivityWithOptions(a.Evaluate, activity.RegisterOptions{Name: activities.EvaluateName})
	r.RegisterActivityWithOptions(a.ReleaseLease, activity.RegisterOptions{Name: activities.ReleaseLeaseName})
	// A provisioned host's slot is leased on its own queue.
	r.RegisterActivityWithOptions(a.AcquireLease, activity.RegisterOptions{Name: activities.AcquireLeaseName})
}

// Register registers everything on one registry (the test suite, where
// queues do not matter).
func Register(r Registry, a *activities.Activities) {
	RegisterShared(r, a)
	r.RegisterActivityWithOptions(a.RunAgent, activity.RegisterOptions{Name: activities.RunAgentName})
	r.RegisterActivityWithOptions(a.ReleaseLease, activity.RegisterOptions{Name: activities.ReleaseLeaseName})
}
