// timeline prints where one run's wall time went, from its history.

package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// timeline prints where one run's wall time went, from its history: per
// activity type and for workflow tasks (by what each led to), the time
// from scheduled to started (dispatch through matching) and from started
// to closed (the work), summed over the run, and the time between the
// first and last event in all.
func timeline(ctx context.Context, c client.Client, id string) error {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return fmt.Errorf("history of %s: %w", id, err)
		}
		events = append(events, ev)
	}
	if len(events) == 0 {
		return nil
	}
	at := map[int64]time.Time{}
	kind := map[int64]string{}
	type span struct {
		n              int
		dispatch, work time.Duration
	}
	spans := map[string]*span{}
	add := func(k string, dispatch, work time.Duration) {
		s := spans[k]
		if s == nil {
			s = &span{}
			spans[k] = s
		}
		s.n++
		s.dispatch += dispatch
		s.work += work
	}
	for i, ev := range events {
		t := ev.GetEventTime().AsTime()
		at[ev.GetEventId()] = t
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			kind[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			kind[ev.GetEventId()] = "workflow task"
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			sched, started := a.GetScheduledEventId(), a.GetStartedEventId()
			if f := ev.GetActivityTaskFailedEventAttributes(); f != nil {
				sched, started = f.GetScheduledEventId(), f.GetStartedEventId()
			}
			add(kind[sched], at[started].Sub(at[sched]), t.Sub(at[started]))
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			a := ev.GetWorkflowTaskCompletedEventAttributes()
			add("task → "+led(events[i+1:]), at[a.GetStartedEventId()].Sub(at[a.GetScheduledEventId()]), t.Sub(at[a.GetStartedEventId()]))
		}
	}
	total := events[len(events)-1].GetEventTime().AsTime().Sub(events[0].GetEventTime().AsTime())
	fmt.Printf("where run %s's %s went (%d events; dispatch: scheduled to started, work: started to closed):\n", id, total.Round(time.Millisecond), len(events))
	names := make([]string, 0, len(spans))
	for k := range spans {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := spans[names[i]], spans[names[j]]
		return a.dispatch+a.work > b.dispatch+b.work
	})
	for _, k := range names {
		s := spans[k]
		fmt.Printf("  %-22s ×%-2d dispatch %6.1f ms  work %6.1f ms\n", k, s.n, ms(s.dispatch), ms(s.work))
	}
	return nil
}

// led names what a workflow task led to, from the events its commands
// made (those that follow its completion): the activity it scheduled, the
// run's close, or nothing (a task that only took a signal in).
func led(after []*historypb.HistoryEvent) string {
	for _, ev := range after {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			return ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			return "close"
		case enumspb.EVENT_TYPE_MARKER_RECORDED, enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
		default:
			return "nothing"
		}
	}
	return "nothing"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
