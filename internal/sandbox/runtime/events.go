// killWatch follows a container's kill, oom and die events.

package runtime

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
)

// killWatch follows a container's kill, oom and die events: the daemon
// reports every kill sent through it (docker kill, a stop, its own
// shutdown) with the signal, so an exit code past 128 that no kill
// explains is the agent's own exit, and one that a kill nobody here sent
// explains came from outside.
type killWatch struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	kills  map[int]int
	oom    bool
	died   chan struct{}
}

func (d *Docker) watchKills(id string) *killWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &killWatch{cancel: cancel, kills: map[int]int{}, died: make(chan struct{})}
	ev := d.c.Events(ctx, client.EventsListOptions{Filters: client.Filters{}.Add("type", "container").Add("container", id).
		Add("event", string(events.ActionKill), string(events.ActionOOM), string(events.ActionDie))})
	go func() {
		defer close(w.died)
		for {
			select {
			case m := <-ev.Messages:
				w.mu.Lock()
				switch m.Action {
				case events.ActionKill:
					if sig, err := strconv.Atoi(m.Actor.Attributes["signal"]); err == nil {
						w.kills[sig]++
					}
				case events.ActionOOM:
					w.oom = true
				}
				w.mu.Unlock()
				if m.Action == events.ActionDie {
					return
				}
			case <-ev.Err:
				return
			}
		}
	}()
	return w
}

func (w *killWatch) stop() { w.cancel() }

// eventsGrace bounds the wait for the die event after the exit: the
// daemon sends it as the container stops.
const eventsGrace = 5 * time.Second

// attribute says who ended the container: a signal only when a kill was
// sent (by sent's owner or from outside), the agent's own exit otherwise.
func (w *killWatch) attribute(res *ExitResult, sent *sentSignals) {
	select {
	case <-w.died:
	case <-time.After(eventsGrace):
	}
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	res.OOMKilled = res.OOMKilled || w.oom
	if res.ExitCode <= 128 || res.OOMKilled {
		return
	}
	sig := res.ExitCode - 128
	switch {
	case w.kills[sig] > sent.count(sig):
		res.Signal, res.KilledOutside = sig, true
	case sent.count(sig) > 0:
		res.Signal = sig
	}
}
