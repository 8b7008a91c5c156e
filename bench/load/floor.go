// The floor under a run's overhead: a workflow of the run's shape alone.

package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/workflows"
)

// The floor under a run's overhead: what Temporal alone costs a no-op
// run's workflow shape on the same server at the same minute, timed run
// for run beside the real ones, so that a machine's slow day shows as
// such instead of as mlrb's. Its worker is this process's, as mlrb's is
// a process of its own.
const (
	floorQueue     = "floor"
	floorHostQueue = "floor-host"
	floorWorkflow  = "FloorShape"
)

// floorWorkers starts the shape's workers on c; stop them when done.
func floorWorkers(c client.Client) (stop func(), err error) {
	// The SDK's logs go nowhere, as the worker's do.
	quiet := client.Options{Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))}
	wc, err := client.NewClientFromExisting(c, quiet)
	if err != nil {
		return nil, fmt.Errorf("floor's client: %w", err)
	}
	wfw := worker.New(wc, floorQueue, worker.Options{})
	wfw.RegisterWorkflowWithOptions(floorShape, workflow.RegisterOptions{Name: floorWorkflow})
	wfw.RegisterActivity(floorLocal)
	host := worker.New(wc, floorHostQueue, worker.Options{})
	host.RegisterActivity(floorStep)
	for i, w := range []worker.Worker{wfw, host} {
		if err := w.Start(); err != nil {
			if i > 0 {
				wfw.Stop()
			}
			wc.Close()
			return nil, fmt.Errorf("floor's worker: %w", err)
		}
	}
	return func() { host.Stop(); wfw.Stop(); wc.Close() }, nil
}

// floorShape does in Temporal what a no-op run does, task by task, and
// nothing of mlrb's: a version marker, four local activities and three
// upserts of the run's phase, three workflow tasks, two activities on
// another queue (the host's, as RunAgent and Evaluate), each returning
// at once.
func floorShape(ctx workflow.Context) error {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: floorHostQueue, StartToCloseTimeout: 10 * time.Second})
	// The first task: the run's version, its task resolved and a slot
	// taken (local activities), its phase, its agent (RunAgent).
	workflow.GetVersion(ctx, "floor", workflow.DefaultVersion, 1)
	for _, p := range []string{"resolving", "leasing"} {
		if err := workflow.ExecuteLocalActivity(lctx, floorLocal, p).Get(ctx, nil); err != nil {
			return err
		}
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, workflows.SAPhase.ValueSet("floor-running")); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(actx, floorStep, "agent").Get(ctx, nil); err != nil {
		return err
	}
	// The second: its phase, its marks picked, its evaluation (Evaluate).
	if err := workflow.UpsertTypedSearchAttributes(ctx, workflows.SAPhase.ValueSet("floor-evaluating")); err != nil {
		return err
	}
	if err := workflow.ExecuteLocalActivity(lctx, floorLocal, "marks").Get(ctx, nil); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(actx, floorStep, "evaluate").Get(ctx, nil); err != nil {
		return err
	}
	// The last: its outcome, its result stored, its close.
	if err := workflow.UpsertTypedSearchAttributes(ctx, workflows.SAPhase.ValueSet("floor-done")); err != nil {
		return err
	}
	return workflow.ExecuteLocalActivity(lctx, floorLocal, "result").Get(ctx, nil)
}

func floorLocal(context.Context, string) error { return nil }

func floorStep(context.Context, string) error { return nil }
