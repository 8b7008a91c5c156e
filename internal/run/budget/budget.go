// A run's time account: granted, used, lost, and its deadlines.

// Package budget is a run's time account and the arithmetic on it: time
// left, the soft and hard deadlines of an attempt, the safety timeout of
// the agent activity and the agent time a lost attempt lost. The
// workflow, the agent activity and the starter all use it, so that a
// budget means the same thing in each. Nothing here reads a clock: times
// come in as arguments, so the workflow can use it deterministically.
package budget

import (
	"encoding/json"
	"time"
)

// Account is a run's account, in agent seconds. Limit is the time limit of
// the task (or the run's override) and Extended what operators added;
// granted time is derived from the two, so an extension can never be
// overwritten by the limit being set. Used is agent time preserved by
// checkpoints; Lost is agent time that ran but died with a crash
// (refunded: it does not count against the budget); InfraWait is time
// spent waiting for a lease or for a lost attempt to be noticed.
type Account struct {
	LimitS     float64 `json:"limit_s"`
	ExtendedS  float64 `json:"extended_s"`
	UsedS      float64 `json:"used_s"`
	LostS      float64 `json:"lost_s"`
	InfraWaitS float64 `json:"infra_wait_s"`
	// PausedS is the time a person's clock was paused (their container
	// frozen, or no lease held until they started again): never agent
	// time, never infra wait.
	PausedS float64 `json:"paused_s,omitempty"`
}

// GrantedS is the time granted in all: the limit plus extensions.
func (l Account) GrantedS() float64 { return l.LimitS + l.ExtendedS }

// Left is the agent time still to give, in seconds, never negative.
func (l Account) Left() float64 { return max(0, l.GrantedS()-l.UsedS) }

// MarshalJSON adds granted_s, derived, for readers of the JSON (status,
// results, the Web UI).
func (l Account) MarshalJSON() ([]byte, error) {
	type plain Account
	return json.Marshal(struct {
		plain
		GrantedS float64 `json:"granted_s"`
	}{plain(l), l.GrantedS()})
}

// Extend grants more time.
func (l *Account) Extend(by time.Duration) { l.ExtendedS += by.Seconds() }

// Preserve records a committed checkpoint covering agentSeconds in all;
// the account only moves forward.
func (l *Account) Preserve(agentSeconds float64) { l.UsedS = max(l.UsedS, agentSeconds) }

// LostAt is the agent time lost by an attempt that reached ranTo agent
// seconds: what lies past the last checkpoint.
func (l Account) LostAt(ranTo float64) float64 { return max(0, ranTo-l.UsedS) }

// Crash books a lost attempt that started at attemptStartS agent seconds,
// ran attemptWallS of wall time and reached ranTo: the work past the last
// checkpoint is lost (refunded), the rest of the wall time was infra time.
func (l *Account) Crash(ranTo, attemptWallS, attemptStartS float64) {
	l.LostS += l.LostAt(ranTo)
	l.Wait(attemptWallS - (ranTo - attemptStartS))
}

// Wait books time spent waiting for infrastructure.
func (l *Account) Wait(s float64) { l.InfraWaitS += max(0, s) }

// Carried is what a run continued in a new execution (a resumed
// benchmark) takes over from the earlier ones: lost and waited time and
// the extensions granted. Used time comes back with the checkpoint.
func (l Account) Carried() Account {
	return Account{ExtendedS: l.ExtendedS, LostS: l.LostS, InfraWaitS: l.InfraWaitS}
}

// Deadlines are one attempt's wall-clock deadlines: SIGTERM at Soft, kill
// at Hard. Grace is the time between the two.
type Deadlines struct {
	Soft, Hard time.Time
	Grace      time.Duration
	// GrantedS is the grant they were computed from; a larger grant
	// moves them.
	GrantedS float64
}

// minAttempt is what an attempt gets when nothing is left: enough to
// start, be told to stop and leave a final checkpoint.
const minAttempt = time.Second

// Attempt computes the deadlines of an attempt that starts at start:
// the hard one when the budget runs out, the soft one grace before it,
// the grace at most a quarter of the time left.
func (l Account) Attempt(start time.Time, grace time.Duration) Deadlines {
	left := max(seconds(l.Left()), minAttempt)
	g := min(grace, left/4)
	hard := start.Add(left)
	return Deadlines{Soft: hard.Add(-g), Hard: hard, Grace: g, GrantedS: l.GrantedS()}
}

// Extend moves both deadlines by what grantedS adds to the grant they
// were computed from; it reports whether they moved.
func (d *Deadlines) Extend(grantedS float64) bool {
	if grantedS <= d.GrantedS {
		return false
	}
	by := seconds(grantedS - d.GrantedS)
	d.Soft, d.Hard, d.GrantedS = d.Soft.Add(by), d.Hard.Add(by), grantedS
	return true
}

// Cancel stops the attempt gracefully from now: the hard deadline comes
// one grace period later (never later than it was).
func (d *Deadlines) Cancel(now time.Time) {
	if h := now.Add(d.Grace); h.Before(d.Hard) {
		d.Hard = h
	}
	d.Soft = now
}

// safetyMargin covers what an attempt does beyond the agent's time
// whatever the workspace's size: starting, stopping, the store's latency.
const safetyMargin = 10 * time.Minute

// SlowThroughput is the pace, in bytes a second, that a workspace is
// assumed to be restored and saved at when timeouts are set: well below
// what a checkpoint does on one host to a local S3 (bench/checkpoint:
// over 200 MiB/s), for a slow store or a busy host.
const SlowThroughput = 32 << 20

// Transfer is how long moving a workspace of bytes may take at
// SlowThroughput.
func Transfer(bytes int64) time.Duration {
	return time.Duration(float64(bytes) / SlowThroughput * float64(time.Second))
}

// SafetyTimeout bounds the agent activity as a whole (its start-to-close
// timeout): the time left, the grace twice (a soft deadline and a cancel
// may each take one), the restore before the agent's clock starts and the
// final checkpoint after it of a workspace of bytes (its last checkpoint's
// size), and a margin. The supervisor's own deadlines end the agent well
// before it; it only catches a worker that lost track.
func (l Account) SafetyTimeout(grace time.Duration, bytes int64) time.Duration {
	return seconds(l.Left()) + 2*grace + 2*Transfer(bytes) + safetyMargin
}

// RanTo estimates how far a lost attempt got, in agent seconds. base is
// where it started; heartbeatS the agent time of its last heartbeat (a
// lower bound, stale by up to the SDK's heartbeat throttle, 0.8 × the
// timeout); wall the attempt's wall time until it was declared lost. The
// server last heard of the worker about one heartbeat timeout before that,
// which bounds the estimate from above.
func RanTo(base, heartbeatS float64, wall, heartbeatTimeout time.Duration) float64 {
	known := max(base, heartbeatS)
	if est := base + (wall - heartbeatTimeout).Seconds(); est > known {
		return min(est, known+0.8*heartbeatTimeout.Seconds())
	}
	return known
}

// RanUntil estimates how far an attempt cut off at end got when nothing
// but wall time is known (a run terminated from outside): it ran from
// since (its start, or its last checkpoint if later) to end.
func (l Account) RanUntil(since, end time.Time) float64 {
	return l.UsedS + max(0, end.Sub(since).Seconds())
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
