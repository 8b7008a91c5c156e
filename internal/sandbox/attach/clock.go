// The person's clock: it runs only while they are in, and freezes or thaws their container as it stops and starts (Settle).

// Package attach puts a person on an agent's rails: the worker's clock
// for their run (Clock), the rooms a worker holds for people's runs
// (Rooms), and the attach server that lets a person with a run's
// credential into a shell in its sealed container, recording each
// session as an asciicast (Server, Dial).
package attach

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
)

// Clock is a person's clock for one attempt, kept by the worker: it starts
// paused and runs only while started. The container is frozen while the
// clock is paused (Settle calls Freeze and Thaw, outside its lock): at
// once when it starts, a moment after it stops, so that the `task stop`
// that stopped it has printed its answer. Time is charged by what the
// container can do, not by what was asked: from a start until the freeze
// after the stop has returned, so that neither the moment before the
// freeze nor a freeze that fails (it is retried) runs uncounted.
type Clock struct {
	// BaseS is the agent time of the run before this attempt; GrantedS
	// its budget; ReleaseAfter how long a pause lasts before the GPU goes
	// back.
	BaseS, GrantedS float64
	ReleaseAfter    time.Duration
	Now             func() time.Time
	Freeze, Thaw    func() error
	// Busy, where the attempt holds GPUs, tells whether they still work
	// (a frozen process launches no kernel, but those it queued run on):
	// the clock counts until they are idle (an error counts as busy).
	Busy func() (bool, error)
	// Later runs f after d (nil: time.AfterFunc); tests run it by hand.
	Later func(d time.Duration, f func())

	mu      sync.Mutex
	settle  sync.Mutex // held while the container is frozen or thawed
	frozen  bool       // under settle
	ended   bool       // the attempt ends: thawed for good
	running bool
	// charging: stopped, and the container not frozen yet (or its freeze
	// failed): the clock still counts.
	charging  bool
	submitted bool
	since     time.Time // when it last started or paused
	ranS      float64   // run in this attempt before since
	pausedS   float64   // paused in this attempt before since
	notes     []contract.Note
	changed   chan struct{}
}

// MaxNote bounds a note, and MaxNotes their number, in an attempt.
const (
	MaxNote  = 1024
	MaxNotes = 200
)

// ErrSubmitted: the person has submitted; the clock does nothing more.
var ErrSubmitted = errors.New("the run is submitted: it is being checkpointed and evaluated")

func (c *Clock) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// begin sets the clock up, paused, from now.
func (c *Clock) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since.IsZero() {
		c.since = c.now()
		c.changed = make(chan struct{})
	}
}

// Do does a `task` verb and returns the clock after it.
func (c *Clock) Do(verb, text string) (contract.Clock, error) {
	c.begin()
	var said string
	settleIn := time.Duration(-1)
	c.mu.Lock()
	now := c.now()
	switch {
	case verb == contract.ClockStatus:
	case c.submitted:
		c.mu.Unlock()
		return c.Read(), ErrSubmitted
	case verb == contract.ClockStart && !c.running && c.charging:
		// Not frozen yet: the time since the stop was run, not paused.
		c.ranS += now.Sub(c.since).Seconds()
		c.running, c.charging, c.since, settleIn, said = true, false, now, 0, "the clock runs"
	case verb == contract.ClockStart && !c.running:
		c.pausedS += now.Sub(c.since).Seconds()
		c.running, c.since, settleIn, said = true, now, 0, "the clock runs"
	case verb == contract.ClockStart:
		said = "the clock was running"
	case verb == contract.ClockStop && c.running:
		c.ranS += now.Sub(c.since).Seconds()
		c.running, c.charging, c.since, settleIn, said = false, true, now, FreezeAfter, "the clock is paused: your container is frozen until you `task start`"
	case verb == contract.ClockStop:
		said = "the clock was paused"
	case verb == contract.ClockNote:
		text = strings.TrimSpace(text)
		if text == "" || len(text) > MaxNote || len(c.notes) >= MaxNotes {
			c.mu.Unlock()
			return c.Read(), fmt.Errorf("a note is 1 to %d bytes, at most %d of them", MaxNote, MaxNotes)
		}
		c.notes = append(c.notes, contract.Note{At: now, AgentS: c.agentS(now), Text: text})
		said = "noted"
	case verb == contract.ClockSubmit:
		if c.running || c.charging {
			c.ranS += now.Sub(c.since).Seconds()
		} else {
			c.pausedS += now.Sub(c.since).Seconds()
		}
		c.running, c.charging, c.submitted, c.since, settleIn, said = false, false, true, now, 0, "submitted: output/ is checkpointed and evaluated; your shells end"
	default:
		c.mu.Unlock()
		return c.Read(), fmt.Errorf("%q: not one of %s", verb, strings.Join(contract.ClockVerbs, ", "))
	}
	if verb != contract.ClockStatus && verb != contract.ClockNote {
		close(c.changed)
		c.changed = make(chan struct{})
	}
	c.mu.Unlock()
	var err error
	switch {
	case settleIn == 0:
		err = c.Settle()
	case settleIn > 0:
		c.later(settleIn, c.settleRetrying)
	}
	out := c.Read()
	out.Said = said
	return out, err
}

// FreezeAfter is how long after the clock stops the container freezes;
// RetryFreeze how long after a failed freeze it is tried again (the
// clock counts meanwhile).
const (
	FreezeAfter = 300 * time.Millisecond
	RetryFreeze = time.Second
	// IdlePoll paces the look at a frozen container's GPUs until idle.
	IdlePoll = 500 * time.Millisecond
)

func (c *Clock) later(d time.Duration, f func()) {
	if c.Later != nil {
		c.Later(d, f)
		return
	}
	time.AfterFunc(d, f)
}

// settleRetrying settles, and tries again while a wanted freeze fails.
func (c *Clock) settleRetrying() {
	if c.Settle() == nil {
		return
	}
	c.mu.Lock()
	again := c.charging
	c.mu.Unlock()
	if again {
		c.later(RetryFreeze, c.settleRetrying)
	}
}

// Settle freezes the container if the clock is paused, thaws it if not;
// calls in any order leave it as the clock is when the last one ends.
func (c *Clock) Settle() error {
	c.begin()
	c.settle.Lock()
	defer c.settle.Unlock()
	c.mu.Lock()
	want := !c.running && !c.submitted && !c.ended
	c.mu.Unlock()
	if want == c.frozen {
		return nil
	}
	hook := c.Thaw
	if want {
		hook = c.Freeze
	}
	if hook != nil {
		if err := hook(); err != nil {
			return fmt.Errorf("the person's container: %w", err)
		}
	}
	c.frozen = want
	if want {
		c.idle()
	}
	return nil
}

// idle ends the charge of a stop once the container is frozen and its
// GPUs (if any) have nothing left to run: the pause starts then, not at
// the stop; while they work, it looks again every IdlePoll.
func (c *Clock) idle() {
	if c.Busy != nil {
		if busy, err := c.Busy(); busy || err != nil {
			c.mu.Lock()
			again := c.charging
			c.mu.Unlock()
			if again {
				c.later(IdlePoll, c.idleIfFrozen)
			}
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.charging {
		now := c.now()
		c.ranS += now.Sub(c.since).Seconds()
		c.charging, c.since = false, now
	}
}

// idleIfFrozen looks at the GPUs again, if the container is still
// frozen for the same stop.
func (c *Clock) idleIfFrozen() {
	c.settle.Lock()
	frozen := c.frozen
	c.settle.Unlock()
	if frozen {
		c.idle()
	}
}

// End thaws the container for good: the attempt ends (a release), and
// its processes must hear their SIGTERM.
func (c *Clock) End() error {
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	return c.Settle()
}

// agentS is the run's agent time at now; c.mu held.
func (c *Clock) agentS(now time.Time) float64 {
	s := c.BaseS + c.ranS
	if c.running || c.charging {
		s += now.Sub(c.since).Seconds()
	}
	return s
}

// Read is the clock now.
func (c *Clock) Read() contract.Clock {
	c.begin()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	out := contract.Clock{Running: c.running, Submitted: c.submitted, AgentS: c.agentS(now), PausedS: c.pausedS}
	out.LeftS = max(0, c.GrantedS-out.AgentS)
	if !c.running && !c.charging && !c.submitted {
		out.PausedS += now.Sub(c.since).Seconds()
		if c.ReleaseAfter > 0 {
			out.ReleaseAt = c.since.Add(c.ReleaseAfter)
		}
	}
	return out
}

// Ran is the agent time this attempt has run, at now.
func (c *Clock) Ran(now time.Time) float64 {
	c.begin()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agentS(now) - c.BaseS
}

// State is the clock's state as it counts: running (started, or stopped
// and not frozen yet), submitted, and how long the current pause has
// lasted (0 while running).
func (c *Clock) State(now time.Time) (running, submitted bool, paused time.Duration) {
	c.begin()
	c.mu.Lock()
	defer c.mu.Unlock()
	counting := c.running || c.charging
	if !counting && !c.submitted {
		paused = now.Sub(c.since)
	}
	return counting, c.submitted, paused
}

// Started tells whether the person has the clock started (their shell is
// open), whatever the freeze is doing.
func (c *Clock) Started() bool {
	c.begin()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// PausedS is the time the clock was paused in this attempt, at now.
func (c *Clock) PausedS(now time.Time) float64 {
	_, _, p := c.State(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pausedS + p.Seconds()
}

// Changed is closed at the clock's next start, stop or submit.
func (c *Clock) Changed() <-chan struct{} {
	c.begin()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Notes are the person's notes so far.
func (c *Clock) Notes() []contract.Note {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]contract.Note(nil), c.notes...)
}
