// Reading what the server knows of a run or benchmark.

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/process/cli"
	"github.com/mlrb/mlrb/internal/process/show"
	"github.com/mlrb/mlrb/workflows"
)

// The starter's few conversations with Temporal, each with the one error
// message a user should see for an unknown id.

func notFound(err error, id string) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return cli.Usagef("no run or benchmark %q (see `starter list [--benchmarks]`)", id)
	}
	return err
}

// described is what the server knows of a run or a benchmark, and which
// of the two the id names: the one place the starter tells them apart.
type described struct {
	*workflowpb.WorkflowExecutionInfo
	run, bench bool
}

// describe reads what the server knows of a run or benchmark.
func describe(ctx context.Context, c client.Client, id string) (described, error) {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return described{}, notFound(err, id)
	}
	kind := d.WorkflowExecutionInfo.GetType().GetName()
	return described{WorkflowExecutionInfo: d.WorkflowExecutionInfo, run: kind == workflows.RunWorkflowName, bench: kind == workflows.BenchmarkWorkflowName}, nil
}

// mustBeRun refuses a benchmark id where a run's is expected, naming
// the command that takes it.
func mustBeRun(g *globals, c client.Client, id, instead string) error {
	info, err := describe(g.ctx, c, id)
	if err != nil {
		return err
	}
	if info.bench {
		return cli.Usagef("%s is a benchmark, not a run: `starter %s %s` shows it", id, instead, id)
	}
	return nil
}

// running tells whether a run or benchmark is still going.
func running(ctx context.Context, c client.Client, id string) (bool, enumspb.WorkflowExecutionStatus, error) {
	info, err := describe(ctx, c, id)
	if err != nil {
		return false, 0, err
	}
	st := info.Status
	return st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, st, nil
}

// mustBeRunning refuses a control for a run that has ended.
func mustBeRunning(ctx context.Context, c client.Client, id string) error {
	ok, st, err := running(ctx, c, id)
	if err != nil {
		return err
	}
	if !ok {
		return cli.Usagef("run %s has ended (%s); see `starter result %s`", id, show.StatusName(st), id)
	}
	return nil
}

// queryStatus asks a run for its status.
func queryStatus(ctx context.Context, c client.Client, id string) (workflows.Status, error) {
	var st workflows.Status
	val, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return st, notFound(err, id)
	}
	if err := val.Get(&st); err != nil {
		return st, fmt.Errorf("decode status of %s: %w", id, err)
	}
	return st, nil
}

// update sends a run an update, waits for it to complete and decodes its
// result into out (which may be nil).
func update(ctx context.Context, c client.Client, id, name string, arg, out any) error {
	opts := client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: name, WaitForStage: client.WorkflowUpdateStageCompleted}
	if arg != nil {
		opts.Args = []any{arg}
	}
	h, err := c.UpdateWorkflow(ctx, opts)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		// An ended run is not found by an update: say that it ended.
		if info, derr := describe(ctx, c, id); derr == nil && info.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return cli.Usagef("%s %s: it has ended (%s); see `starter result %s`", name, id, show.StatusName(info.Status), id)
		}
	}
	if err != nil {
		return notFound(fmt.Errorf("%s %s: %w", name, id, err), id)
	}
	if err := h.Get(ctx, out); err != nil {
		return cli.Usagef("%s %s: %v", name, id, err)
	}
	return nil
}

// await waits for a run's or a benchmark's result into out (nil: none)
// through a cluster outage: the runs wait it out, and so does a starter
// waiting for them (saying so once). Anything else ends the wait.
func await(g *globals, run client.WorkflowRun, out any) error {
	said := false
	for delay := awaitRetry; ; delay = min(2*delay, 15*time.Second) {
		err := run.Get(g.ctx, out)
		if err == nil || g.ctx.Err() != nil || !app.IsOutage(err) {
			return err
		}
		if !said {
			fmt.Fprintf(g.errOut, "%s: Temporal is not serving (%v); the runs are safe: waiting for it\n", run.GetID(), err)
			said = true
		}
		select {
		case <-g.ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}

// awaitRetry is await's first pause after an outage's answer.
var awaitRetry = time.Second

// listAll lists what query matches, page after page (each followed by
// its token, so that no listing stops at a page's size), up to limit
// executions (0: all), calling each on every one.
func listAll(ctx context.Context, c client.Client, query string, limit int, each func(*workflowpb.WorkflowExecutionInfo)) error {
	var token []byte
	n := 0
	for {
		size := 1000
		if limit > 0 {
			size = min(size, limit-n)
		}
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token, PageSize: int32(size)})
		if err != nil {
			return fmt.Errorf("list %s: %w", query, err)
		}
		for _, e := range resp.Executions {
			if limit > 0 && n >= limit {
				return nil
			}
			each(e)
			n++
		}
		if token = resp.NextPageToken; len(token) == 0 || (limit > 0 && n >= limit) {
			return nil
		}
	}
}
