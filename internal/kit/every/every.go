// Tick: a function called every period until its context ends.

// Package every runs a function on a period until its context ends or
// the function says it is done: the loop of the provisioned-host reaper,
// the container fence, the workspace size watch and the spot-notice
// watch.
package every

import (
	"context"
	"time"
)

// Tick calls fn every period (the first time one period from now) until
// ctx ends or fn returns false.
func Tick(ctx context.Context, period time.Duration, fn func() bool) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !fn() {
			return
		}
	}
}

// Now is Tick with a first call at once.
func Now(ctx context.Context, period time.Duration, fn func() bool) {
	if ctx.Err() == nil && fn() {
		Tick(ctx, period, fn)
	}
}
