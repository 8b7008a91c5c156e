// await waits for every run and returns the span of each scored one from its first workflow task to its close, and how many did not end scored.

package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/run/runs"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// The benchmark's reads of Temporal: runs awaited, spans, counts.

// await waits for every run and returns the span of each scored one from
// its first workflow task to its close, and how many did not end scored.
func await(ctx context.Context, c client.Client, ids []string) ([]time.Duration, int, error) {
	spans := make([]time.Duration, len(ids))
	var lost atomic.Int32
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i, id := range ids {
		g.Go(func() error {
			var res runs.Result
			if err := c.GetWorkflow(gctx, id, "").Get(gctx, &res); err != nil || res.Outcome != runs.OutcomeScored {
				lost.Add(1)
				return nil
			}
			s, err := span(gctx, c, id)
			if err != nil {
				return err
			}
			spans[i] = s
			return nil
		})
	}
	err := g.Wait()
	// A lost run has no span.
	scored := spans[:0]
	for _, s := range spans {
		if s > 0 {
			scored = append(scored, s)
		}
	}
	return scored, int(lost.Load()), err
}

// span is a run's time from its first workflow task being picked up to
// its close: what orchestration took, without the wait for a worker.
func span(ctx context.Context, c client.Client, id string) (time.Duration, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var first, last time.Time
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return 0, fmt.Errorf("history of %s: %w", id, err)
		}
		if first.IsZero() && e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED {
			first = e.GetEventTime().AsTime()
		}
		last = e.GetEventTime().AsTime()
	}
	if first.IsZero() {
		return 0, errors.New("history of " + id + " has no workflow task")
	}
	return last.Sub(first), nil
}

func count(ctx context.Context, c client.Client, ns, q string) (int64, error) {
	resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: ns, Query: q})
	if err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	return resp.GetCount(), nil
}

func dialWithin(ctx context.Context, cfg *config.Config, within time.Duration) (client.Client, error) {
	deadline := time.Now().Add(within)
	for {
		c, err := app.Dial(ctx, cfg, zap.NewNop())
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// pct is the p-th quantile of ds (1: the largest).
func pct(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1))].Round(time.Millisecond)
}
