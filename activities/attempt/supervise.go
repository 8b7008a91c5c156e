// supervisor watches one running agent.

package attempt

import (
	"cmp"
	"context"
	"fmt"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/sandbox/attach"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
)

// supervisor watches one running agent. Each event has its own method;
// run turns timers and channels into those calls. What the supervisor
// does outside the agent goes through hooks, so that tests can drive
// every order of events with a fake handle and no clock.
type supervisor struct {
	h       runtime.Handle
	dl      budget.Deadlines
	stopped activities.StopReason
	started time.Time
	base    float64 // agent seconds preserved before this attempt
	// failure is why the supervisor ended the agent as failed (a limit
	// broken), "" otherwise.
	failure string
	now     func() time.Time
	hooks   hooks
	log     *zap.Logger
	// person is a person's clock (nil: an agent's attempt): see
	// followPerson.
	person    *attach.Clock
	submitted bool
	// hardKilled: the hard deadline came with the agent still running,
	// as far as the supervisor knew, and it was sent the kill.
	hardKilled bool
	// controlsEvery paces the reads of the run's controls (0: PollEvery).
	controlsEvery time.Duration
}

// hooks are the supervisor's effects beyond the agent.
type hooks interface {
	// reached records the agent time reached, which heartbeats carry.
	reached(agentSeconds float64)
	checkpoint(agentSeconds float64)
	shipLogs()
	// askSteering starts a read of the run's controls unless one is in
	// flight; its answer, when one comes, arrives on steered. The read
	// waits on a workflow task, seconds on a loaded worker, so it never
	// holds the loop that keeps the deadlines.
	askSteering()
	steered() <-chan steering
	// deadlineMoved tells the agent its new deadline.
	deadlineMoved(hard time.Time)
	// overLimit says which limit of its allowance the attempt passed
	// ("": none).
	overLimit() string
	// llmSpent tells whether the run's LLM budget is spent.
	llmSpent() bool
	// reportUsage sends the attempt's LLM ledger to the run if it changed.
	reportUsage()
	// stopping: the supervisor is about to signal or kill the agent.
	stopping()
}

// steering is the run's controls as read: the budget granted and
// whether a cancel was asked for.
type steering struct {
	grantedS float64
	cancel   bool
}

// endKind is how supervision ended.
type endKind int

const (
	// agentEnded: the agent exited or was stopped by its deadlines or an
	// operator; the attempt ends with a final checkpoint.
	agentEnded endKind = iota
	// handedBack: the agent was stopped under the attempt (killed from
	// outside, its worker stopping); it is checkpointed and the attempt
	// goes back to the run as an infra loss with nothing lost.
	handedBack
	// abandoned: the run gave up on the attempt; nothing more is written.
	abandoned
)

type ending struct {
	kind   endKind
	exit   runtime.ExitResult
	used   float64
	reason string // why it was handed back
}

// Event timing. The heartbeat runs often (at most every second, four
// times per heartbeat timeout) so a lost worker is noticed fast; logs
// and the operator's controls are polled every few seconds, a pace an
// operator does not notice.
const (
	maxHeartbeatEvery = time.Second
	// PollEvery also paces the LLM usage reports, which go out at polls:
	// tests bound a run's count of reports by it.
	PollEvery = 5 * time.Second
)

// agentSeconds is the agent time reached now: a person's is the time
// their clock ran.
func (s *supervisor) agentSeconds() float64 {
	if s.person != nil {
		return s.base + s.person.Ran(s.now())
	}
	return s.base + s.now().Sub(s.started).Seconds()
}

// followPerson follows a person's clock: a submit ends the attempt as an
// agent that exited (SIGTERM to the container's first process, which
// exits 0), a pause past its ReleaseAfter ends it released (checkpointed,
// its lease given back), and the deadlines are the agent time left from
// now, so that they stand still in agent time while the clock is paused.
func (s *supervisor) followPerson() {
	if s.person == nil || s.stopped != activities.StopExited || s.submitted {
		return
	}
	now := s.now()
	running, submitted, paused := s.person.State(now)
	switch {
	case submitted:
		s.submitted = true
		s.log.Info("the person submitted: SIGTERM, then the final checkpoint")
		s.signal(syscall.SIGTERM)
		return
	case !running && s.person.ReleaseAfter > 0 && (paused >= s.person.ReleaseAfter || s.person.PausedS(now) >= activities.MaxPausesPerAttempt*s.person.ReleaseAfter.Seconds()):
		s.stopped = activities.StopReleased
		s.log.Info("the person paused past release_after: checkpointed, the lease given back", zap.Duration("paused", paused))
		s.signal(syscall.SIGTERM)
		return
	}
	hard := now.Add(time.Duration(max(0, s.dl.GrantedS-s.agentSeconds()) * float64(time.Second)))
	if hard.Sub(s.dl.Hard) >= time.Second {
		s.dl.Soft, s.dl.Hard = hard.Add(-s.dl.Grace), hard
		s.hooks.deadlineMoved(hard)
	}
}

// thawPerson lets a person's frozen container hear that it is stopped
// (a frozen process takes no signal, and a paused container cannot be
// killed): from here on it stays thawed.
func (s *supervisor) thawPerson() {
	if s.person == nil {
		return
	}
	if err := s.person.End(); err != nil {
		s.log.Warn("thaw the person's container", zap.Error(err))
	}
}

// paused: a person's clock is paused (no deadline passes meanwhile).
func (s *supervisor) paused() bool {
	if s.person == nil {
		return false
	}
	running, submitted, _ := s.person.State(s.now())
	return !running && !submitted
}

// tick: the agent time reached, for the heartbeats.
func (s *supervisor) tick() { s.hooks.reached(s.agentSeconds()) }

// checkpointDue: a periodic checkpoint.
func (s *supervisor) checkpointDue() { s.hooks.checkpoint(s.agentSeconds()) }

// poll ships logs and the LLM ledger, and enforces the workspace limit
// and the LLM budget.
func (s *supervisor) poll() {
	s.followPerson()
	s.hooks.shipLogs()
	s.hooks.reportUsage()
	if s.stopped == activities.StopExited && s.failure == "" && s.hooks.llmSpent() {
		s.llmBudgetSpent()
	}
	if why := s.hooks.overLimit(); why != "" && s.failure == "" && s.stopped == activities.StopExited {
		s.failure = why
		s.log.Warn("the attempt passed its allowance: the agent is killed and the run fails", zap.String("reason", why))
		s.kill()
	}
}

// steer applies the run's controls as read, unless the agent is being
// killed for a limit it broke: that ending stands.
func (s *supervisor) steer(st steering) {
	if s.failure != "" {
		return
	}
	s.extension(st.grantedS)
	if st.cancel {
		s.cancel()
	}
}

// extension moves the deadlines when more time was granted, unless the
// agent is already being stopped.
func (s *supervisor) extension(grantedS float64) {
	if s.stopped != activities.StopExited || !s.dl.Extend(grantedS) {
		return
	}
	s.hooks.deadlineMoved(s.dl.Hard)
	s.log.Info("budget extended", zap.Time("deadline", s.dl.Hard))
}

// cancel stops the agent gracefully: SIGTERM now, kill after the grace.
func (s *supervisor) cancel() {
	if s.stopped == activities.StopCanceled {
		return
	}
	s.stopped = activities.StopCanceled
	s.log.Info("canceled by an operator: SIGTERM, kill after the grace period")
	s.dl.Cancel(s.now())
	s.signal(syscall.SIGTERM)
}

// llmBudgetSpent stops the agent as its deadline would (SIGTERM now,
// kill after the grace): it keeps its work and is evaluated.
func (s *supervisor) llmBudgetSpent() {
	s.stopped = activities.StopLLMBudget
	s.log.Info("the run's LLM budget is spent: SIGTERM, kill after the grace period")
	s.dl.Cancel(s.now())
	s.signal(syscall.SIGTERM)
}

// softDeadline: SIGTERM, so the agent can save its best model.
func (s *supervisor) softDeadline() {
	if s.stopped != activities.StopExited || s.paused() {
		return
	}
	s.stopped = activities.StopDeadline
	s.log.Info("soft deadline: SIGTERM")
	s.signal(syscall.SIGTERM)
}

// hardDeadline: kill.
func (s *supervisor) hardDeadline() {
	if s.paused() && s.stopped == activities.StopExited {
		return
	}
	if s.stopped == activities.StopExited {
		s.stopped = activities.StopDeadline
	}
	s.log.Info("hard deadline: kill")
	s.hardKilled = true
	s.kill()
}

// workerStop: the worker is stopping (a deploy, a drain). The agent is
// stopped and the attempt handed back, so the run resumes at once from
// a checkpoint of this moment rather than after a heartbeat timeout.
func (s *supervisor) workerStop() ending {
	s.log.Info("worker stopping: the agent is stopped and checkpointed")
	s.kill()
	return ending{kind: handedBack, reason: "worker stopping: agent stopped and checkpointed"}
}

// runGone: the run gave up on the attempt; the agent never outlives it.
func (s *supervisor) runGone() ending {
	s.kill()
	return ending{kind: abandoned}
}

// agentExit: the agent ended. Killed by a signal nobody here sent (an
// operator's docker kill, the daemon stopping it), or lost by the runtime
// (the daemon gone), it was taken from under the attempt: its work is
// kept and the run runs another attempt. Anything else is the agent's own
// ending, failures included: an exit code it chose (137 too), its own
// signal, an OOM kill under its own memory limit.
func (s *supervisor) agentExit(res runtime.ExitResult) ending {
	used := s.agentSeconds()
	if s.stopped == activities.StopExited && s.failure == "" && !res.OOMKilled {
		switch {
		case res.KilledOutside:
			return ending{kind: handedBack, exit: res, used: used, reason: fmt.Sprintf("agent was killed from outside (%s)", res)}
		case res.Err != nil:
			return ending{kind: handedBack, exit: res, used: used, reason: fmt.Sprintf("the runtime lost the agent (%s)", res)}
		}
	}
	return ending{kind: agentEnded, exit: res, used: used}
}

func (s *supervisor) signal(sig syscall.Signal) {
	s.hooks.stopping()
	s.thawPerson()
	if err := s.h.Signal(sig); err != nil {
		s.log.Warn("signal the agent", zap.Stringer("signal", sig), zap.Error(err))
	}
}

func (s *supervisor) kill() {
	s.hooks.stopping()
	s.thawPerson()
	if err := s.h.Kill(); err != nil {
		s.log.Warn("kill the agent", zap.Error(err))
	}
}

// run turns time and channels into events until supervision ends; an
// agent stopped under the attempt is waited for before run returns.
func (s *supervisor) run(ctx context.Context, stopping <-chan struct{}, heartbeatTimeout, interval time.Duration) ending {
	hb := time.NewTicker(heartbeatEvery(heartbeatTimeout))
	defer hb.Stop()
	poll := time.NewTicker(PollEvery)
	defer poll.Stop()
	ck := time.NewTicker(interval)
	defer ck.Stop()
	controls := time.NewTicker(cmp.Or(s.controlsEvery, PollEvery))
	defer controls.Stop()
	soft, hard := time.NewTimer(s.dl.Soft.Sub(s.now())), time.NewTimer(s.dl.Hard.Sub(s.now()))
	defer soft.Stop()
	defer hard.Stop()
	s.tick()
	for {
		dl := s.dl
		var end *ending
		var clock <-chan struct{}
		if s.person != nil {
			clock = s.person.Changed()
		}
		select {
		case <-clock:
			s.followPerson()
		case <-stopping:
			e := s.workerStop()
			end = &e
		case <-ctx.Done():
			e := s.runGone()
			end = &e
		case <-hb.C:
			s.tick()
		case <-poll.C:
			s.poll()
		case <-controls.C:
			s.hooks.askSteering()
		case st := <-s.hooks.steered():
			s.steer(st)
		case <-ck.C:
			s.checkpointDue()
		case <-soft.C:
			s.softDeadline()
		case <-hard.C:
			if res, ok := s.exited(); ok { // it exited as the deadline came
				return s.agentExit(res)
			}
			s.hardDeadline()
		case res := <-s.h.Wait():
			return s.agentExit(res)
		}
		if end != nil {
			<-s.h.Wait()
			end.used = s.agentSeconds()
			return *end
		}
		if s.dl != dl {
			soft.Reset(s.dl.Soft.Sub(s.now()))
			hard.Reset(s.dl.Hard.Sub(s.now()))
		}
	}
}

// killedAtTheHardDeadline tells an agent the hard deadline's SIGKILL
// ended from one that had exited on its own: a loaded daemon may report
// an exit seconds late, but a process killed by SIGKILL did not choose
// its exit code.
func killedAtTheHardDeadline(s *supervisor, exit runtime.ExitResult) bool {
	return s.hardKilled && exit.Signal == int(syscall.SIGKILL)
}

// exited is the agent's exit when it is known already.
func (s *supervisor) exited() (runtime.ExitResult, bool) {
	select {
	case res := <-s.h.Wait():
		return res, true
	default:
		return runtime.ExitResult{}, false
	}
}

func heartbeatEvery(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return maxHeartbeatEvery
	}
	return min(timeout/4, maxHeartbeatEvery)
}
