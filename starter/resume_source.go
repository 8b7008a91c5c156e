// resumeSource is where a resume's plan reads a benchmark's runs.

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"

	"github.com/mlrb/mlrb/internal/results/resume"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/workflows"
)

// resumeSource is where a resume's plan reads a benchmark's runs: a
// Temporal namespace, and the results they stored in the blob store.
type resumeSource struct {
	Client client.Client
	Store  blob.Store
}

// List runs one visibility query, paged: WorkflowId STARTS_WITH prefix.
// Of a run id's executions (a run started again by an earlier resume),
// the one that started last is kept.
func (t resumeSource) List(ctx context.Context, prefix string) (map[string]resume.Listed, error) {
	if strings.ContainsAny(prefix, `'"\`) {
		return nil, fmt.Errorf("run id prefix %q holds a quote", prefix)
	}
	q := fmt.Sprintf("WorkflowId STARTS_WITH '%s' AND WorkflowType = '%s'", prefix, workflows.RunWorkflowName)
	out := map[string]resume.Listed{}
	err := listAll(ctx, t.Client, q, 0, func(e *workflowpb.WorkflowExecutionInfo) {
		l := listed(e)
		if prev, ok := out[l.ID]; !ok || l.Start.After(prev.Start) {
			out[l.ID] = l
		}
	})
	return out, err
}

func listed(e *workflowpb.WorkflowExecutionInfo) resume.Listed {
	l := resume.Listed{ID: e.GetExecution().GetWorkflowId()}
	switch e.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		l.State = resume.Running
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		l.State = resume.Completed
	}
	if e.StartTime != nil {
		l.Start = e.StartTime.AsTime()
	}
	if e.CloseTime != nil {
		l.Close = e.CloseTime.AsTime()
	}
	return l
}

// Results reads the stored results; a run whose result was never stored
// (its store failed for an hour) is asked for its workflow result.
func (t resumeSource) Results(ctx context.Context, ids []string) (map[string]*runs.Result, error) {
	stored := make([]runresults.Child, len(ids))
	for i, id := range ids {
		stored[i] = runresults.Child{ID: id}
	}
	got, err := runresults.GetAll[runs.Result](ctx, t.Store, stored, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*runs.Result, len(ids))
	for i, id := range ids {
		if got[i] != nil {
			out[id] = got[i]
			continue
		}
		var res runs.Result
		if err := t.Client.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			return nil, fmt.Errorf("result of %s: %w", id, err)
		}
		out[id] = &res
	}
	return out, nil
}

// Reached queries how far a run that closed at closed got.
func (t resumeSource) Reached(ctx context.Context, id string, closed time.Time) (resume.Reached, error) {
	var st workflows.Status
	val, err := t.Client.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return resume.Reached{}, fmt.Errorf("status of %s: %w", id, err)
	}
	if err := val.Get(&st); err != nil {
		return resume.Reached{}, fmt.Errorf("decode status of %s: %w", id, err)
	}
	return resume.Reached{Budget: st.Budget, AgentS: st.ReachedAt(closed)}, nil
}
