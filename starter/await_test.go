package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// flakyRun answers an outage for its first outages calls, then err.
type flakyRun struct {
	client.WorkflowRun
	outages, calls int
	err            error
}

func (r *flakyRun) GetID() string { return "bench-x" }

func (r *flakyRun) Get(context.Context, any) error {
	r.calls++
	if r.calls <= r.outages {
		return serviceerror.NewDeadlineExceeded("context deadline exceeded")
	}
	return r.err
}

// TestAwaitRidesOutAnOutage: a starter waiting for a result (--wait,
// result --wait, watch, anchors measure) waits through the cluster's
// outage answers, saying so once, as the runs do; any other error ends
// the wait at once.
func TestAwaitRidesOutAnOutage(t *testing.T) {
	defer func(d time.Duration) { awaitRetry = d }(awaitRetry)
	awaitRetry = time.Millisecond
	var errOut bytes.Buffer
	g := &globals{ctx: context.Background(), errOut: &errOut}
	r := &flakyRun{outages: 3}
	if err := await(g, r, nil); err != nil || r.calls != 4 {
		t.Fatalf("after 3 outage answers: %v, %d calls; want the result at the 4th", err, r.calls)
	}
	if n := strings.Count(errOut.String(), "waiting for it"); n != 1 {
		t.Fatalf("said %d times: %q", n, errOut.String())
	}
	gone := errors.New("workflow terminated")
	r = &flakyRun{outages: 1, err: gone}
	if err := await(g, r, nil); !errors.Is(err, gone) || r.calls != 2 {
		t.Fatalf("another error: %v after %d calls; want it at once", err, r.calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r = &flakyRun{outages: 100}
	if err := await(&globals{ctx: ctx, errOut: &errOut}, r, nil); err == nil || r.calls != 1 {
		t.Fatalf("a starter stopped: %v after %d calls; want the outage's error at once", err, r.calls)
	}
}
