// humanRoom prepares a person's attempt.

package attempt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/attach"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
)

// A person's attempt runs on the agents' rails with three differences:
// its clock is the worker's (attach.Clock: it runs only while the person
// has started it, and the container is frozen while it is paused), the
// person works in shells opened through the worker's attach server (the
// attempt's room), and a pause longer than AgentInput.ReleaseAfter ends
// the attempt with a checkpoint, its lease given back (StopReleased),
// until the person starts the clock again.

// humanRoom prepares a person's attempt: the clock's token and where the
// container's `task` reaches it (through the door), and the room the
// attach server finds the run in. Its shells and freezing come once the
// container runs (openRoom).
func (a *Attempts) humanRoom(in activities.AgentInput, spec *runtime.TaskSpec) (*attach.Room, error) {
	if !definition(in).Human {
		return nil, nil
	}
	if spec.Door == nil {
		return nil, temporal.NewNonRetryableApplicationError("a person's run needs the container runtime (host.runtime docker): their shells open in its container", activities.ErrBadTask, nil)
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("clock token: %w", err)
	}
	token := "mlrb-clock-" + hex.EncodeToString(b)
	spec.Env[contract.EnvClockURL] = "http://" + workspace.DoorAddr + contract.ClockPath
	spec.Env[contract.EnvClockToken] = token
	spec.Redact = append(spec.Redact, token)
	clock := &attach.Clock{BaseS: in.Budget.UsedS, GrantedS: in.Budget.GrantedS(), ReleaseAfter: in.ReleaseAfter}
	shell := runtime.ShellSpec{Command: []string{"/bin/sh"}, User: spec.User, Dir: spec.Env[contract.EnvWorkdir],
		Env: []string{"TERM=xterm-256color", "PS1=" + in.Task.ID + ":\\w$ "}}
	brief := fmt.Sprintf("task %s: %s. Its statement is in $%s; your model goes in $%s.", in.Task.ID, in.Task.Title, contract.EnvPromptFile, contract.EnvOutputDir)
	return &attach.Room{RunID: in.RunID, Attempt: in.Attempt, Clock: clock, Shell: shell, Brief: brief, Token: token}, nil
}

// startTask starts the attempt's task behind its door and, for a
// person's attempt, sets their clock up and lets them in (person nil for
// an agent's); closeDoor closes both.
func (a *Attempts) startTask(ctx context.Context, in activities.AgentInput, at *workspace.Attempt, spec runtime.TaskSpec, ai *attemptLLM, log *zap.Logger) (runtime.Handle, *attach.Room, func(), error) {
	person, err := a.humanRoom(in, &spec)
	if err != nil {
		return nil, nil, nil, err
	}
	h, closeDoor, err := a.Sandbox.Start(ctx, spec, at.Door, ai.side(), at.Allow.Door, clockOf(person), log)
	if err != nil {
		ai.stopServing()
		return nil, nil, nil, fmt.Errorf("start agent: %w", err)
	}
	if shut := closeDoor; ai != nil && ai.stopReplay != nil {
		closeDoor = func() { shut(); ai.stopReplay() }
	}
	leave, err := a.openRoom(ctx, in, person, h)
	if err != nil {
		_ = h.Destroy()
		closeDoor()
		return nil, nil, nil, err
	}
	return h, person, func() { leave(); closeDoor() }, nil
}

// personal adds what a person's clock kept to their attempt's result.
func personal(sv *supervisor, res *activities.AgentResult) {
	if sv.person != nil {
		res.PausedS, res.Notes = sv.person.PausedS(sv.now()), sv.person.Notes()
	}
}

// clockOf is the clock the door serves (nil: an agent's attempt).
func clockOf(room *attach.Room) http.Handler {
	if room == nil {
		return nil
	}
	return room
}

// roomClock is the clock supervision follows (nil: an agent's).
func roomClock(room *attach.Room) *attach.Clock {
	if room == nil {
		return nil
	}
	return room.Clock
}

// openRoom lets people in once the person's container runs: the clock
// freezes and thaws it, and starts running when the person asked for
// this attempt (AgentInput.ClockRunning), else paused, frozen. release
// closes the room when the attempt ends.
func (a *Attempts) openRoom(ctx context.Context, in activities.AgentInput, room *attach.Room, h runtime.Handle) (release func(), err error) {
	if room == nil {
		return func() {}, nil
	}
	shells, ok := h.(runtime.Shells)
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError("a person's run needs the container runtime (host.runtime docker)", activities.ErrBadTask, nil)
	}
	room.Shells = shells
	// Outliving the activity's cancel: a container is thawed to be stopped.
	bounded := func(f func(context.Context) error) func() error {
		return func() error {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			return f(fctx)
		}
	}
	room.Clock.Freeze, room.Clock.Thaw = bounded(shells.Freeze), bounded(shells.Thaw)
	if a.Host != nil && a.Host.Observe.GPU != nil && len(in.Lease.Devices) > 0 {
		q := a.Host.Observe.GPU
		// The freezer stops the container's processes, not the kernels
		// they queued: the clock counts until the devices are idle.
		devices := in.Lease.Devices
		room.Clock.Busy = func() (bool, error) {
			qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			defer cancel()
			samples, err := q.Devices(qctx, devices, time.Now())
			if err != nil {
				return true, err
			}
			return slices.ContainsFunc(samples, func(s observe.GPUSample) bool { return s.Util > 0 }), nil
		}
	}
	if in.ClockRunning {
		if _, err := room.Clock.Do(contract.ClockStart, ""); err != nil {
			return nil, fmt.Errorf("start the person's clock: %w", err)
		}
	} else if err := room.Clock.Settle(); err != nil {
		return nil, err
	}
	if a.Rooms == nil {
		return func() {}, nil
	}
	return a.Rooms.Open(room), nil
}
