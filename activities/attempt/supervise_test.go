package attempt

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/attach"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
)

// fakeHandle records what the supervisor does to the agent; when exitOn
// is set, the agent exits on that signal.
type fakeHandle struct {
	sent   []syscall.Signal
	done   chan runtime.ExitResult
	exitOn syscall.Signal
}

func newFakeHandle() *fakeHandle { return &fakeHandle{done: make(chan runtime.ExitResult, 1)} }

func (h *fakeHandle) ID() string                      { return "fake" }
func (h *fakeHandle) Wait() <-chan runtime.ExitResult { return h.done }
func (h *fakeHandle) Kill() error                     { return h.Signal(syscall.SIGKILL) }
func (h *fakeHandle) Destroy() error                  { return nil }
func (h *fakeHandle) Signal(s syscall.Signal) error {
	h.sent = append(h.sent, s)
	if h.exitOn != 0 && s == h.exitOn {
		h.done <- runtime.ExitResult{}
	}
	return nil
}

// fakeHooks records the supervisor's effects and answers its steering
// reads from a script.
type fakeHooks struct {
	beats, checkpoints, ships int
	moved                     []time.Time
	steer                     steerAnswer
	over                      string
	spent                     bool
	usageReports              int
	answers                   chan steering
}

type steerAnswer struct {
	granted    float64
	cancel, ok bool
}

func (k *fakeHooks) reached(float64)    { k.beats++ }
func (k *fakeHooks) checkpoint(float64) { k.checkpoints++ }
func (k *fakeHooks) shipLogs()          { k.ships++ }
func (k *fakeHooks) stopping()          {}

// askSteering answers at once when the script knows the controls.
func (k *fakeHooks) askSteering() {
	if k.steer.ok {
		k.answer(steering{grantedS: k.steer.granted, cancel: k.steer.cancel})
	}
}

func (k *fakeHooks) answer(st steering) {
	if k.answers == nil {
		k.answers = make(chan steering, 1)
	}
	k.answers <- st
}

func (k *fakeHooks) steered() <-chan steering  { return k.answers }
func (k *fakeHooks) deadlineMoved(t time.Time) { k.moved = append(k.moved, t) }
func (k *fakeHooks) overLimit() string         { return k.over }
func (k *fakeHooks) llmSpent() bool            { return k.spent }
func (k *fakeHooks) reportUsage()              { k.usageReports++ }

// An event at a time after the attempt's start.
type event struct {
	at    time.Duration
	kind  string // tick, checkpoint, poll, soft, hard, exit, stop, gone
	steer steerAnswer
	exit  runtime.ExitResult
	spent bool // the LLM budget is spent from this event on
}

var (
	t0      = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	killed  = runtime.ExitResult{Signal: int(syscall.SIGKILL)}
	outside = runtime.ExitResult{ExitCode: 137, Signal: int(syscall.SIGKILL), KilledOutside: true}
	exit137 = runtime.ExitResult{ExitCode: 137}
	lost    = runtime.ExitResult{ExitCode: -1, Err: errors.New("daemon gone")}
	oomKill = runtime.ExitResult{ExitCode: 137, Signal: int(syscall.SIGKILL), OOMKilled: true}
)

const (
	sigTERM = syscall.SIGTERM
	sigKILL = syscall.SIGKILL
)

// TestSupervisorEvents drives the supervisor through the orders of events
// that matter: a 30 s budget, 5 s grace (soft deadline at 25 s).
func TestSupervisorEvents(t *testing.T) {
	cases := []struct {
		name    string
		events  []event
		signals []syscall.Signal
		stopped activities.StopReason
		end     endKind
		hard    time.Duration // the hard deadline at the end, after t0
		moved   int           // deadline file rewrites
	}{
		{"exits on its own", []event{{at: time.Second, kind: "tick"}, {at: 10 * time.Second, kind: "checkpoint"}, {at: 12 * time.Second, kind: "exit"}},
			nil, activities.StopExited, agentEnded, 30 * time.Second, 0},
		{"soft deadline, then exits", []event{{at: 25 * time.Second, kind: "soft"}, {at: 26 * time.Second, kind: "exit"}},
			[]syscall.Signal{sigTERM}, activities.StopDeadline, agentEnded, 30 * time.Second, 0},
		{"ignores SIGTERM, killed at the hard deadline", []event{{at: 25 * time.Second, kind: "soft"}, {at: 30 * time.Second, kind: "hard"}, {at: 30 * time.Second, kind: "exit", exit: killed}},
			[]syscall.Signal{sigTERM, sigKILL}, activities.StopDeadline, agentEnded, 30 * time.Second, 0},
		{"extended before the soft deadline", []event{{at: 20 * time.Second, kind: "poll", steer: steerAnswer{granted: 40, ok: true}}, {at: 35 * time.Second, kind: "soft"}, {at: 36 * time.Second, kind: "exit"}},
			[]syscall.Signal{sigTERM}, activities.StopDeadline, agentEnded, 40 * time.Second, 1},
		{"an extension after the soft deadline is too late", []event{{at: 25 * time.Second, kind: "soft"}, {at: 26 * time.Second, kind: "poll", steer: steerAnswer{granted: 40, ok: true}}, {at: 27 * time.Second, kind: "exit"}},
			[]syscall.Signal{sigTERM}, activities.StopDeadline, agentEnded, 30 * time.Second, 0},
		{"the same grant twice moves the deadline once", []event{{at: 5 * time.Second, kind: "poll", steer: steerAnswer{granted: 40, ok: true}}, {at: 10 * time.Second, kind: "poll", steer: steerAnswer{granted: 40, ok: true}}, {at: 11 * time.Second, kind: "exit"}},
			nil, activities.StopExited, agentEnded, 40 * time.Second, 1},
		{"steering unknown: nothing changes", []event{{at: 5 * time.Second, kind: "poll", steer: steerAnswer{granted: 90, cancel: true}}, {at: 6 * time.Second, kind: "exit"}},
			nil, activities.StopExited, agentEnded, 30 * time.Second, 0},
		{"canceled: SIGTERM, kill after the grace", []event{{at: 10 * time.Second, kind: "poll", steer: steerAnswer{granted: 30, cancel: true, ok: true}}, {at: 10 * time.Second, kind: "soft"}, {at: 15 * time.Second, kind: "hard"}, {at: 15 * time.Second, kind: "exit", exit: killed}},
			[]syscall.Signal{sigTERM, sigKILL}, activities.StopCanceled, agentEnded, 15 * time.Second, 0},
		{"canceled twice: one SIGTERM", []event{{at: 10 * time.Second, kind: "poll", steer: steerAnswer{granted: 30, cancel: true, ok: true}}, {at: 12 * time.Second, kind: "poll", steer: steerAnswer{granted: 30, cancel: true, ok: true}}, {at: 13 * time.Second, kind: "exit"}},
			[]syscall.Signal{sigTERM}, activities.StopCanceled, agentEnded, 15 * time.Second, 0},
		{"extended and canceled at once: the cancel wins", []event{{at: 10 * time.Second, kind: "poll", steer: steerAnswer{granted: 60, cancel: true, ok: true}}, {at: 11 * time.Second, kind: "exit"}},
			[]syscall.Signal{sigTERM}, activities.StopCanceled, agentEnded, 15 * time.Second, 1},
		{"canceled after the soft deadline", []event{{at: 25 * time.Second, kind: "soft"}, {at: 26 * time.Second, kind: "poll", steer: steerAnswer{granted: 30, cancel: true, ok: true}}, {at: 27 * time.Second, kind: "exit"}},
			[]syscall.Signal{sigTERM, sigTERM}, activities.StopCanceled, agentEnded, 30 * time.Second, 0},
		{"LLM budget spent: SIGTERM, kill after the grace", []event{{at: 10 * time.Second, kind: "poll", spent: true}, {at: 11 * time.Second, kind: "poll", spent: true}, {at: 15 * time.Second, kind: "hard"}, {at: 15 * time.Second, kind: "exit", exit: killed}},
			[]syscall.Signal{sigTERM, sigKILL}, activities.StopLLMBudget, agentEnded, 15 * time.Second, 0},
		{"LLM budget spent during the grace of a deadline: the deadline stands", []event{{at: 25 * time.Second, kind: "soft"}, {at: 26 * time.Second, kind: "poll", spent: true}, {at: 27 * time.Second, kind: "exit"}},
			[]syscall.Signal{sigTERM}, activities.StopDeadline, agentEnded, 30 * time.Second, 0},
		{"killed from outside: handed back", []event{{at: 8 * time.Second, kind: "exit", exit: outside}},
			nil, activities.StopExited, handedBack, 30 * time.Second, 0},
		{"exit 137 of its own: the agent's failure (audit #7)", []event{{at: 8 * time.Second, kind: "exit", exit: exit137}},
			nil, activities.StopExited, agentEnded, 30 * time.Second, 0},
		{"a SIGKILL nobody here saw sent: the agent's own", []event{{at: 8 * time.Second, kind: "exit", exit: killed}},
			nil, activities.StopExited, agentEnded, 30 * time.Second, 0},
		{"lost by the runtime: handed back", []event{{at: 8 * time.Second, kind: "exit", exit: lost}},
			nil, activities.StopExited, handedBack, 30 * time.Second, 0},
		{"OOM-killed: the agent's failure, not handed back", []event{{at: 8 * time.Second, kind: "exit", exit: oomKill}},
			nil, activities.StopExited, agentEnded, 30 * time.Second, 0},
		{"worker stopping: killed and handed back", []event{{at: 8 * time.Second, kind: "checkpoint"}, {at: 9 * time.Second, kind: "stop"}},
			[]syscall.Signal{sigKILL}, activities.StopExited, handedBack, 30 * time.Second, 0},
		{"worker stopping during the grace", []event{{at: 25 * time.Second, kind: "soft"}, {at: 26 * time.Second, kind: "stop"}},
			[]syscall.Signal{sigTERM, sigKILL}, activities.StopDeadline, handedBack, 30 * time.Second, 0},
		{"the run gave up on the attempt", []event{{at: 8 * time.Second, kind: "gone"}},
			[]syscall.Signal{sigKILL}, activities.StopExited, abandoned, 30 * time.Second, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, hooks := newFakeHandle(), &fakeHooks{}
			now := t0
			s := &supervisor{h: h, dl: budget.Account{LimitS: 30}.Attempt(t0, 5*time.Second), stopped: activities.StopExited, started: t0, base: 100,
				now: func() time.Time { return now }, hooks: hooks, log: zap.NewNop()}
			var end *ending
			for _, e := range c.events {
				now = t0.Add(e.at)
				hooks.steer, hooks.spent = e.steer, e.spent
				var got ending
				switch e.kind {
				case "tick":
					s.tick()
				case "checkpoint":
					s.checkpointDue()
				case "poll": // a poll, and a read of the controls
					s.poll()
					s.hooks.askSteering()
					select {
					case st := <-hooks.answers:
						s.steer(st)
					default:
					}
				case "soft":
					s.softDeadline()
				case "hard":
					s.hardDeadline()
				case "exit":
					got = s.agentExit(e.exit)
				case "stop":
					got = s.workerStop()
				case "gone":
					got = s.runGone()
				default:
					t.Fatalf("unknown event %q", e.kind)
				}
				if e.kind == "exit" || e.kind == "stop" || e.kind == "gone" {
					end = &got
				}
			}
			if !slices.Equal(h.sent, c.signals) {
				t.Errorf("signals %v, want %v", h.sent, c.signals)
			}
			if s.stopped != c.stopped {
				t.Errorf("stopped by %q, want %q", s.stopped, c.stopped)
			}
			if end == nil || end.kind != c.end {
				t.Errorf("ending %+v, want kind %d", end, c.end)
			}
			if got := s.dl.Hard.Sub(t0); got != c.hard {
				t.Errorf("hard deadline at %v, want %v", got, c.hard)
			}
			if len(hooks.moved) != c.moved {
				t.Errorf("deadline file rewritten %d times, want %d", len(hooks.moved), c.moved)
			}
		})
	}
}

func TestSupervisorAgentSeconds(t *testing.T) {
	now := t0.Add(12 * time.Second)
	s := &supervisor{started: t0, base: 100, now: func() time.Time { return now }}
	if got := s.agentSeconds(); got != 112 {
		t.Fatalf("agent seconds %v, want 112", got)
	}
	if got := (s.agentExit(runtime.ExitResult{})).used; got != 112 {
		t.Fatalf("an ending reports the agent time, got %v", got)
	}
}

// The loop: a soft deadline already past sends SIGTERM at once; the agent
// exits on it and supervision ends with the deadline as the reason.
func TestSupervisorLoopSoftDeadline(t *testing.T) {
	h, hooks := newFakeHandle(), &fakeHooks{}
	h.exitOn = syscall.SIGTERM
	now := time.Now()
	s := &supervisor{h: h, dl: budget.Deadlines{Soft: now.Add(-time.Millisecond), Hard: now.Add(time.Hour), Grace: time.Minute}, stopped: activities.StopExited,
		started: now, now: time.Now, hooks: hooks, log: zap.NewNop()}
	end := s.run(context.Background(), nil, time.Hour, time.Hour)
	if end.kind != agentEnded || s.stopped != activities.StopDeadline || !slices.Equal(h.sent, []syscall.Signal{sigTERM}) || hooks.beats < 1 {
		t.Fatalf("end %+v stopped %q signals %v beats %d", end, s.stopped, h.sent, hooks.beats)
	}
}

// The loop takes the run's controls when their read answers, between
// its polls: a cancel read is a SIGTERM, and the agent exits on it.
func TestSupervisorLoopSteeringAnswer(t *testing.T) {
	h, hooks := newFakeHandle(), &fakeHooks{}
	h.exitOn = syscall.SIGTERM
	hooks.answer(steering{grantedS: 30, cancel: true})
	now := time.Now()
	s := &supervisor{h: h, dl: budget.Deadlines{Soft: now.Add(time.Hour), Hard: now.Add(2 * time.Hour), Grace: time.Minute}, stopped: activities.StopExited,
		started: now, now: time.Now, hooks: hooks, log: zap.NewNop()}
	end := s.run(context.Background(), nil, time.Hour, time.Hour)
	if end.kind != agentEnded || s.stopped != activities.StopCanceled || !slices.Equal(h.sent, []syscall.Signal{sigTERM}) {
		t.Fatalf("end %+v stopped %q signals %v", end, s.stopped, h.sent)
	}
}

// The loop: an agent whose exit is known as the hard deadline comes is
// not killed, whichever of the two the loop sees first.
func TestSupervisorLoopExitAtTheHardDeadline(t *testing.T) {
	for range 20 {
		h, hooks := newFakeHandle(), &fakeHooks{}
		h.done <- runtime.ExitResult{}
		now := time.Now()
		s := &supervisor{h: h, dl: budget.Deadlines{Soft: now.Add(-2 * time.Second), Hard: now.Add(-time.Second), Grace: time.Second}, stopped: activities.StopDeadline,
			started: now.Add(-time.Minute), now: time.Now, hooks: hooks, log: zap.NewNop()}
		time.Sleep(time.Millisecond) // both timers due before the loop looks
		end := s.run(context.Background(), nil, time.Hour, time.Hour)
		if end.kind != agentEnded || s.hardKilled || len(h.sent) != 0 {
			t.Fatalf("end %+v hard-killed %v signals %v", end, s.hardKilled, h.sent)
		}
	}
}

// A run's cancel read after the agent broke a limit leaves the failure
// as the ending: no SIGTERM after the kill.
func TestSteeringAfterALimitBroken(t *testing.T) {
	h, hooks := newFakeHandle(), &fakeHooks{over: "workspace over agent.workspace_limit_gb"}
	s := &supervisor{h: h, dl: budget.Account{LimitS: 30}.Attempt(t0, 5*time.Second), stopped: activities.StopExited, started: t0,
		now: func() time.Time { return t0.Add(10 * time.Second) }, hooks: hooks, log: zap.NewNop()}
	s.poll()
	s.steer(steering{grantedS: 60, cancel: true})
	if !slices.Equal(h.sent, []syscall.Signal{sigKILL}) || s.stopped != activities.StopExited || s.failure != hooks.over || len(hooks.moved) != 0 {
		t.Fatalf("signals %v, stopped %q, failure %q, deadline moved %d times", h.sent, s.stopped, s.failure, len(hooks.moved))
	}
}

// The loop: a stopping worker kills the agent, waits for it and hands the
// attempt back.
func TestSupervisorLoopWorkerStop(t *testing.T) {
	h, hooks := newFakeHandle(), &fakeHooks{}
	h.exitOn = syscall.SIGKILL
	now := time.Now()
	stopping := make(chan struct{})
	close(stopping)
	s := &supervisor{h: h, dl: budget.Deadlines{Soft: now.Add(time.Hour), Hard: now.Add(2 * time.Hour)}, stopped: activities.StopExited,
		started: now, now: time.Now, hooks: hooks, log: zap.NewNop()}
	end := s.run(context.Background(), stopping, time.Hour, time.Hour)
	if end.kind != handedBack || !slices.Equal(h.sent, []syscall.Signal{sigKILL}) {
		t.Fatalf("end %+v signals %v", end, h.sent)
	}
}

// TestWorkspaceOverLimit: a workspace over its limit gets the agent
// killed once, and that kill ends the attempt as the agent's failure,
// never as a kill from outside (which would run it again).
func TestWorkspaceOverLimit(t *testing.T) {
	h, hooks := newFakeHandle(), &fakeHooks{over: "workspace over agent.workspace_limit_gb"}
	s := &supervisor{h: h, dl: budget.Account{LimitS: 30}.Attempt(t0, 5*time.Second), stopped: activities.StopExited, started: t0,
		now: func() time.Time { return t0.Add(10 * time.Second) }, hooks: hooks, log: zap.NewNop()}
	s.poll()
	s.poll()
	end := s.agentExit(killed)
	if !slices.Equal(h.sent, []syscall.Signal{sigKILL}) || end.kind != agentEnded || s.failure != hooks.over {
		t.Fatalf("signals %v, end %+v, failure %q", h.sent, end, s.failure)
	}
}

// TestSupervisorFollowsAPerson: a person's agent time is their clock's;
// while it is paused the deadlines move on in wall time and do not pass;
// a pause past release_after ends the attempt released (thawed, SIGTERM),
// and a submit ends it as an agent that exited.
func TestSupervisorFollowsAPerson(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	now := func() time.Time { return clock }
	newSupervisor := func() (*supervisor, *fakeHandle, *attach.Clock, *fakeHooks) {
		h, k := newFakeHandle(), &fakeHooks{}
		// The container freezes as the clock stops (Later runs the
		// freeze at once): the pause counts from then.
		p := &attach.Clock{BaseS: 10, GrantedS: 100, ReleaseAfter: time.Minute, Now: now, Later: func(_ time.Duration, f func()) { f() }}
		dl := budget.Account{LimitS: 100, UsedS: 10}.Attempt(clock, 5*time.Second)
		return &supervisor{h: h, dl: dl, stopped: activities.StopExited, started: clock, base: 10, now: now, hooks: k, log: zap.NewNop(), person: p}, h, p, k
	}
	s, h, p, k := newSupervisor()
	_, _ = p.Do(contract.ClockStart, "")
	clock = clock.Add(30 * time.Second)
	_, _ = p.Do(contract.ClockStop, "")
	clock = clock.Add(50 * time.Second) // paused, under release_after
	s.followPerson()
	if got := s.agentSeconds(); got != 40 {
		t.Fatalf("agent seconds = %v, want 40 (10 before, 30 on the clock)", got)
	}
	if want := clock.Add(60 * time.Second); !s.dl.Hard.Equal(want) || len(k.moved) != 1 {
		t.Fatalf("hard deadline %s, want %s (60 s of agent time left from now), moved %d", s.dl.Hard, want, len(k.moved))
	}
	s.hardDeadline()
	if len(h.sent) != 0 || s.stopped != activities.StopExited {
		t.Fatalf("a deadline passed while paused: %v %s", h.sent, s.stopped)
	}
	clock = clock.Add(11 * time.Second) // past release_after
	s.followPerson()
	if s.stopped != activities.StopReleased || !slices.Equal(h.sent, []syscall.Signal{syscall.SIGTERM}) {
		t.Fatalf("after release_after: %s %v", s.stopped, h.sent)
	}

	s, h, p, _ = newSupervisor()
	_, _ = p.Do(contract.ClockStart, "")
	_, _ = p.Do(contract.ClockSubmit, "")
	s.followPerson()
	s.followPerson()
	if s.stopped != activities.StopExited || !slices.Equal(h.sent, []syscall.Signal{syscall.SIGTERM}) {
		t.Fatalf("after a submit: %s %v", s.stopped, h.sent)
	}
}

// An agent the hard deadline's kill was sent to is reported killed only
// when the kill ended it: an exit of its own after SIGTERM, reported
// late by a loaded daemon, is an agent that kept the contract.
func TestKilledAfterGraceOnlyWhenKilled(t *testing.T) {
	for _, c := range []struct {
		exit   runtime.ExitResult
		killed bool
	}{{runtime.ExitResult{}, false}, {runtime.ExitResult{ExitCode: 3}, false}, {killed, true}} {
		sv := &supervisor{stopped: activities.StopDeadline, hardKilled: true}
		res := agentEnding(sv, ending{kind: agentEnded, exit: c.exit})
		if got := strings.HasPrefix(res.Reason, activities.KilledAfterGrace); got != c.killed {
			t.Errorf("exit %s: reason %q, killed after the grace %v, want %v", c.exit, res.Reason, got, c.killed)
		}
	}
}
