package attach

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
)

// container is a person's container as a freezer sees it: how long it
// has run thawed, at the fake time; each freeze takes freezeTakes.
type container struct {
	ft          *fakeTime
	thawedAt    time.Time
	thawed      bool
	ran         time.Duration
	freezeTakes time.Duration
	failFreezes int
}

func (k *container) freeze() error {
	k.ft.add(k.freezeTakes) // the container runs while the freezer works
	if k.failFreezes > 0 {
		k.failFreezes--
		return errors.New("docker pause: timeout")
	}
	if k.thawed {
		k.ran += k.ft.now().Sub(k.thawedAt)
		k.thawed = false
	}
	return nil
}

func (k *container) thaw() error {
	if !k.thawed {
		k.thawed, k.thawedAt = true, k.ft.now()
	}
	return nil
}

// TestStopStartCyclesAreCounted (audit M2): scripted stop/start cycles
// run the container only as long as the clock counts: each stop is
// charged until its freeze has returned (FreezeAfter, then the freeze
// itself), so over 200 cycles the clock is within 1 s of the container's
// time thawed.
func TestStopStartCyclesAreCounted(t *testing.T) {
	ft := &fakeTime{t: time.Unix(1_800_000_000, 0)}
	k := &container{ft: ft, freezeTakes: 30 * time.Millisecond}
	var later []func()
	c := &Clock{GrantedS: 1e6, Now: ft.now, Freeze: k.freeze, Thaw: k.thaw,
		Later: func(_ time.Duration, f func()) { later = append(later, f) }}
	if err := c.Settle(); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if _, err := c.Do(contract.ClockStart, ""); err != nil {
			t.Fatal(err)
		}
		ft.add(30 * time.Millisecond) // `task stop` runs
		if _, err := c.Do(contract.ClockStop, ""); err != nil {
			t.Fatal(err)
		}
		ft.add(FreezeAfter)
		for len(later) > 0 {
			f := later[0]
			later = later[1:]
			f()
		}
		ft.add(200 * time.Millisecond) // the paused prompt, then `task start`
	}
	counted := c.Ran(ft.now())
	if d := math.Abs(counted - k.ran.Seconds()); d > 1 {
		t.Fatalf("the clock counted %.2f s; the container ran %.2f s thawed (%.2f s apart)", counted, k.ran.Seconds(), d)
	}
	t.Logf("200 cycles: counted %.2f s, the container ran %.2f s", counted, k.ran.Seconds())
}

// TestAFailedFreezeKeepsTheClockRunning (audit M2): a freeze that fails
// leaves the clock counting, as the container runs, and is tried again
// until it holds; the pause starts when it does.
func TestAFailedFreezeKeepsTheClockRunning(t *testing.T) {
	ft := &fakeTime{t: time.Unix(1_800_000_000, 0)}
	k := &container{ft: ft, failFreezes: 3}
	var later []time.Duration
	var run []func()
	c := &Clock{GrantedS: 1e6, Now: ft.now, Freeze: k.freeze, Thaw: k.thaw,
		Later: func(d time.Duration, f func()) { later, run = append(later, d), append(run, f) }}
	_, _ = c.Do(contract.ClockStart, "")
	ft.add(10 * time.Second)
	_, _ = c.Do(contract.ClockStop, "")
	for i := 0; i < len(run); i++ {
		ft.add(later[i])
		run[i]()
		if running, _, _ := c.State(ft.now()); running != (i < 3) {
			t.Fatalf("after freeze %d (%d fail): counting %v", i+1, 3, running)
		}
	}
	if len(run) != 4 || later[1] != RetryFreeze {
		t.Fatalf("freezes tried %d times, after %v; want 4, the failed ones again after %s", len(run), later, RetryFreeze)
	}
	want := 10 + FreezeAfter.Seconds() + 3*RetryFreeze.Seconds()
	if got := c.Ran(ft.now()); math.Abs(got-want) > 1e-6 {
		t.Fatalf("counted %.3f s, want %.3f (until the freeze held)", got, want)
	}
	ft.add(time.Minute)
	if got := c.Ran(ft.now()); math.Abs(got-want) > 1e-6 {
		t.Fatalf("counted %.3f s while frozen", got)
	}
}

// TestAPauseWaitsForTheGPUs (audit M2): the freezer stops processes, not
// the kernels they queued: the clock counts until the leased devices
// are idle, then the pause starts; a device that cannot be asked counts
// as busy.
func TestAPauseWaitsForTheGPUs(t *testing.T) {
	ft := &fakeTime{t: time.Unix(1_800_000_000, 0)}
	k := &container{ft: ft}
	answers := []error{nil, errors.New("nvidia-smi: timeout"), nil, nil}
	busy := []bool{true, true, true, false}
	asked := 0
	var run []func()
	c := &Clock{GrantedS: 1e6, Now: ft.now, Freeze: k.freeze, Thaw: k.thaw,
		Busy: func() (bool, error) {
			i := asked
			asked++
			return busy[i], answers[i]
		},
		Later: func(_ time.Duration, f func()) { run = append(run, f) }}
	_, _ = c.Do(contract.ClockStart, "")
	ft.add(10 * time.Second)
	_, _ = c.Do(contract.ClockStop, "")
	ft.add(FreezeAfter)
	for i := 0; i < len(run); i++ {
		run[i]()
		ft.add(IdlePoll)
	}
	if asked != 4 {
		t.Fatalf("the GPUs were asked %d times, want 4 (busy, unknown, busy, idle)", asked)
	}
	want := 10 + FreezeAfter.Seconds() + 3*IdlePoll.Seconds()
	if got := c.Ran(ft.now()); math.Abs(got-want) > 1e-6 {
		t.Fatalf("counted %.3f s, want %.3f (until the GPUs were idle)", got, want)
	}
}
