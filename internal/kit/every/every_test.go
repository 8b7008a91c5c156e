package every

import (
	"context"
	"testing"
	"time"
)

func TestTickStopsWhenDoneOrCanceled(t *testing.T) {
	n := 0
	Tick(context.Background(), time.Millisecond, func() bool { n++; return n < 3 })
	if n != 3 {
		t.Fatalf("called %d times; want 3 (it said done on the third)", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Tick(ctx, time.Millisecond, func() bool { t.Fatal("called after its context ended"); return true })
}

func TestNowCallsAtOnce(t *testing.T) {
	n := 0
	// A period no test waits for: the one call is the immediate one.
	Now(context.Background(), time.Hour, func() bool { n++; return false })
	if n != 1 {
		t.Fatalf("called %d times; want 1, at once", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Now(ctx, time.Millisecond, func() bool { t.Fatal("called after its context ended"); return true })
}
