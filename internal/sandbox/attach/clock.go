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
// paused and runs only while started. Freeze and thaw are called as it
// pauses and starts (the container frozen while paused), outside its lock.
type Clock struct {
	// BaseS is the agent time of the run before this attempt; GrantedS
	// its budget; ReleaseAfter how long a pause lasts before the GPU goes
	// back.
	BaseS, GrantedS float64
	ReleaseAfter    time.Duration
	Now             func() time.Time
	Freeze, Thaw    func() error

	mu        sync.Mutex
	running   bool
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
	var hook func() error
	var said string
	c.mu.Lock()
	now := c.now()
	switch {
	case verb == contract.ClockStatus:
	case c.submitted:
		c.mu.Unlock()
		return c.Read(), ErrSubmitted
	case verb == contract.ClockStart && !c.running:
		c.pausedS += now.Sub(c.since).Seconds()
		c.running, c.since, hook, said = true, now, c.Thaw, "the clock runs"
	case verb == contract.ClockStart:
		said = "the clock was running"
	case verb == contract.ClockStop && c.running:
		c.ranS += now.Sub(c.since).Seconds()
		c.running, c.since, hook, said = false, now, c.Freeze, "the clock is paused: your container is frozen until you `task start`"
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
		if c.running {
			c.ranS += now.Sub(c.since).Seconds()
		} else {
			c.pausedS += now.Sub(c.since).Seconds()
			hook = c.Thaw // its first process is told to end
		}
		c.running, c.submitted, c.since, said = false, true, now, "submitted: output/ is checkpointed and evaluated; your shells end"
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
	if hook != nil {
		err = hook()
	}
	out := c.Read()
	out.Said = said
	return out, err
}

// agentS is the run's agent time at now; c.mu held.
func (c *Clock) agentS(now time.Time) float64 {
	s := c.BaseS + c.ranS
	if c.running {
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
	if !c.running && !c.submitted {
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

// State is the clock's state: running, submitted, and how long the
// current pause has lasted (0 while running).
func (c *Clock) State(now time.Time) (running, submitted bool, paused time.Duration) {
	c.begin()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running && !c.submitted {
		paused = now.Sub(c.since)
	}
	return c.running, c.submitted, paused
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
