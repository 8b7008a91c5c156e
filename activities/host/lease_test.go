package host

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/mocks"
	"go.temporal.io/sdk/temporal"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/fleet/gpu"
)

// TestLeaseAtOnceAsksNobody: a full host answers a lease asked at once
// (the worker running the run, within its workflow task) with
// NoCapacity, without asking the server whether a holder has ended; the
// same request through the queue asks, takes back the slot of a run
// that ended, and is granted it.
func TestLeaseAtOnceAsksNobody(t *testing.T) {
	pool, err := gpu.NewPool(gpu.Options{Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Acquire("old#", "old-run/r1", 0); err != nil {
		t.Fatal(err)
	}
	c := &mocks.Client{}
	c.On("DescribeWorkflowExecution", mock.Anything, "old-run", "r1").Return(&workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED}}, nil)
	a := &Leases{Host: Host{HostID: "h", HostQueue: "mlrb-host-h", GPUs: pool}, Client: c}
	req := activities.LeaseRequest{RunID: "new-run", Attempt: 1, AtOnce: true}

	_, err = a.AcquireLease(context.Background(), req)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.ErrNoCapacity {
		t.Fatalf("at once on a full host: %v, want %s", err, activities.ErrNoCapacity)
	}
	c.AssertNotCalled(t, "DescribeWorkflowExecution", mock.Anything, mock.Anything, mock.Anything)

	req.AtOnce = false
	l, err := a.AcquireLease(context.Background(), req)
	if err != nil || l.HostQueue != "mlrb-host-h" {
		t.Fatalf("through the queue: %+v, %v", l, err)
	}
	c.AssertNumberOfCalls(t, "DescribeWorkflowExecution", 1)
}
