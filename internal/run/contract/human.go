// The person's `task` command's wire to the worker through the run's door.

package contract

import (
	"fmt"
	"time"
)

// A person's `task` command (deploy/human.Dockerfile) reaches the worker
// through the run's door: it POSTs to EnvClockURL/<verb> with
// "Authorization: Bearer <EnvClockToken>", and the worker answers with
// the Clock. The clock is the worker's: it starts paused and runs only
// while started; paused time is never agent time.
const (
	EnvClockURL   = "MLRB_CLOCK_URL"
	EnvClockToken = "MLRB_CLOCK_TOKEN"
	// ClockPath is where the door serves the clock.
	ClockPath = "/mlrb/clock/"
)

// The clock's verbs.
const (
	ClockStart  = "start"
	ClockStop   = "stop"
	ClockStatus = "status"
	ClockNote   = "note"
	ClockSubmit = "submit"
)

// ClockVerbs are the verbs, in the order `task` lists them.
var ClockVerbs = []string{ClockStart, ClockStop, ClockStatus, ClockNote, ClockSubmit}

// Clock is a person's clock as the worker keeps it.
type Clock struct {
	// Running: the clock runs (started); else it is paused.
	Running bool `json:"running"`
	// Submitted: the person ended the run; it is being checkpointed and
	// evaluated.
	Submitted bool `json:"submitted,omitempty"`
	// AgentS is the time the person has worked, all attempts together;
	// LeftS what is left of the run's budget; PausedS the time paused in
	// this attempt.
	AgentS  float64 `json:"agent_s"`
	LeftS   float64 `json:"left_s"`
	PausedS float64 `json:"paused_s"`
	// ReleaseAt is when a pause gives the GPU back (zero while running).
	ReleaseAt time.Time `json:"release_at,omitzero"`
	// Said is what the worker says of the verb just done.
	Said string `json:"said,omitempty"`
}

// String is the clock as `task status` prints it.
func (c Clock) String() string {
	state := "paused"
	switch {
	case c.Submitted:
		state = "submitted"
	case c.Running:
		state = "running"
	}
	s := fmt.Sprintf("clock %s: worked %s, %s left", state, Clockwise(c.AgentS), Clockwise(c.LeftS))
	if !c.ReleaseAt.IsZero() {
		s += fmt.Sprintf("; paused %s, the GPU goes back at %s unless you `task start`", Clockwise(c.PausedS), c.ReleaseAt.UTC().Format("15:04:05 UTC"))
	}
	if c.Said != "" {
		s = c.Said + "\n" + s
	}
	return s
}

// Note is what a person wrote with `task note`, at their agent time.
type Note struct {
	At     time.Time `json:"at"`
	AgentS float64   `json:"agent_s"`
	Text   string    `json:"text"`
}

// Clockwise writes seconds as 1h02m03s.
func Clockwise(s float64) string {
	return time.Duration(max(0, s) * float64(time.Second)).Round(time.Second).String()
}
