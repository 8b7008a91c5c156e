package host

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
)

// fakeClock advances by a step on each reading.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// TestLivenessFences: how the server answers heartbeats decides whether
// the attempt may go on. A worker cut off from the server for the
// heartbeat timeout fences itself (the run has given the attempt up);
// one the server no longer knows fences at once; a cancel from the run
// cancels; short outages are ridden out.
func TestLivenessFences(t *testing.T) {
	unavailable := serviceerror.NewUnavailable("connection refused")
	cases := []struct {
		name    string
		answers []error // one per heartbeat; the last repeats
		fenced  bool
		cause   error
		beats   int // heartbeats sent before it ended (0: not ended)
	}{
		{"cut off for the timeout", []error{nil, unavailable}, true, activities.ErrFenced, 5},
		{"short outages", []error{nil, unavailable, unavailable, nil, unavailable, unavailable, nil}, false, nil, 0},
		{"timed out on the server", []error{nil, serviceerror.NewNotFound("activity already timed out")}, true, activities.ErrFenced, 2},
		{"canceled by the run", []error{nil, temporal.NewCanceledError()}, true, context.Canceled, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			l := &Liveness{stop: make(chan struct{}), stopped: make(chan struct{}), dir: t.TempDir(), cancel: cancel, log: zap.NewNop()}
			var mu sync.Mutex
			sent := 0
			send := func(context.Context, activities.Heartbeat) error {
				mu.Lock()
				defer mu.Unlock()
				sent++
				if sent > 12 {
					close(l.stop) // long enough: the attempt goes on
				}
				return c.answers[min(sent, len(c.answers))-1]
			}
			clk := &fakeClock{t: time.Unix(0, 0)}
			// A 4 s timeout; the fake clock moves a second per heartbeat.
			l.run(ctx, send, 4*time.Second, time.Millisecond, clk.now)
			if !c.fenced {
				if ctx.Err() != nil {
					t.Fatalf("ended: %v", context.Cause(ctx))
				}
				return
			}
			if !errors.Is(context.Cause(ctx), c.cause) || sent != c.beats {
				t.Fatalf("cause %v after %d heartbeats; want %v after %d", context.Cause(ctx), sent, c.cause, c.beats)
			}
		})
	}
}
