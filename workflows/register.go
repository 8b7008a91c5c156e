// WorkflowRegistry is what takes workflows.

package workflows

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"
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
	r.RegisterWorkflowWithOptions(AnchorWorkflow, workflow.RegisterOptions{Name: AnchorWorkflowName})
}

// RegisterShared registers what the shared task queue serves: the
// workflows and the activities any host may run.
func RegisterShared(r Registry, s *Set) {
	RegisterWorkflows(r)
	registerOn(r, s, onShared)
}

// RegisterHost registers what a host's own queue serves: the agent
// attempts and evaluations pinned to the host that holds their lease, the
// release, and the lease of a provisioned host.
func RegisterHost(r Registry, s *Set) { registerOn(r, s, onHost) }

// Register registers everything on one registry (the test suite, where
// queues do not matter).
func Register(r Registry, s *Set) {
	RegisterWorkflows(r)
	registerOn(r, s, onShared|onHost)
}

func registerOn(r Registry, s *Set, on served) {
	for _, e := range catalogue {
		e.register(r, s, on)
	}
}
