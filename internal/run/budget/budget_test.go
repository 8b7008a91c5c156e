package budget

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func TestAccount(t *testing.T) {
	cases := []struct {
		name          string
		l             Account
		granted, left float64
		lostAt, ranTo float64
		carried       Account
	}{
		{"fresh", Account{LimitS: 100}, 100, 100, 0, 0, Account{}},
		{"half used", Account{LimitS: 100, UsedS: 50}, 100, 50, 10, 60, Account{}},
		{"extended", Account{LimitS: 100, ExtendedS: 30, UsedS: 120}, 130, 10, 0, 110, Account{ExtendedS: 30}},
		{"overrun never goes negative", Account{LimitS: 10, UsedS: 12}, 10, 0, 0, 5, Account{}},
		{"carries lost, waited and extended, not used", Account{LimitS: 60, ExtendedS: 5, UsedS: 20, LostS: 3, InfraWaitS: 4}, 65, 45, 1, 21, Account{ExtendedS: 5, LostS: 3, InfraWaitS: 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if g := c.l.GrantedS(); g != c.granted {
				t.Errorf("granted %v, want %v", g, c.granted)
			}
			if l := c.l.Left(); l != c.left {
				t.Errorf("left %v, want %v", l, c.left)
			}
			if l := c.l.LostAt(c.ranTo); l != c.lostAt {
				t.Errorf("lost at %v: %v, want %v", c.ranTo, l, c.lostAt)
			}
			if cr := c.l.Carried(); cr != c.carried {
				t.Errorf("carried %+v, want %+v", cr, c.carried)
			}
		})
	}
}

// An extension granted before the limit is known (a run still resolving
// its task) survives the limit being set.
func TestExtensionSurvivesTheLimit(t *testing.T) {
	var l Account
	l.Extend(10 * time.Second)
	l.LimitS = 30
	if l.GrantedS() != 40 {
		t.Fatalf("granted %v, want 40", l.GrantedS())
	}
}

func TestCrashAndWait(t *testing.T) {
	l := Account{LimitS: 100}
	l.Preserve(30)
	l.Preserve(20) // an older checkpoint: ignored
	// Started at 30 s of agent time, reached 42 s, took 50 s of wall time
	// before it was declared lost: 12 s lost, 38 s infra.
	l.Crash(42, 50, 30)
	l.Wait(-1) // a clock step backwards books nothing
	if l.UsedS != 30 || l.LostS != 12 || l.InfraWaitS != 38 || l.Left() != 70 {
		t.Fatalf("%+v", l)
	}
}

func TestAttemptDeadlines(t *testing.T) {
	cases := []struct {
		name       string
		l          Account
		grace      time.Duration
		soft, hard time.Duration // after t0
		safety     time.Duration
	}{
		{"24 h, 60 s grace", Account{LimitS: 86400}, time.Minute, 86340 * time.Second, 86400 * time.Second, 86400*time.Second + 12*time.Minute},
		{"resumed at 20 of 30 s", Account{LimitS: 30, UsedS: 20}, time.Minute, 7500 * time.Millisecond, 10 * time.Second, 10*time.Second + 12*time.Minute},
		{"extended", Account{LimitS: 30, ExtendedS: 10, UsedS: 20}, 2 * time.Second, 18 * time.Second, 20 * time.Second, 24*time.Second + 10*time.Minute},
		{"nothing left still gets a second", Account{LimitS: 30, UsedS: 31}, time.Minute, 750 * time.Millisecond, time.Second, 12 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.l.Attempt(t0, c.grace)
			if got := d.Soft.Sub(t0); got != c.soft {
				t.Errorf("soft after %v, want %v", got, c.soft)
			}
			if got := d.Hard.Sub(t0); got != c.hard {
				t.Errorf("hard after %v, want %v", got, c.hard)
			}
			if got := c.l.SafetyTimeout(c.grace, 0); got != c.safety {
				t.Errorf("safety timeout %v, want %v", got, c.safety)
			}
			if got := c.l.SafetyTimeout(c.grace, 0); got <= d.Hard.Sub(t0) {
				t.Errorf("the safety timeout %v must outlast the hard deadline", got)
			}
		})
	}
}

func TestDeadlinesExtendAndCancel(t *testing.T) {
	cases := []struct {
		name       string
		grants     []float64
		cancelAt   time.Duration // 0: no cancel
		soft, hard time.Duration
		moved      bool
	}{
		{"no change", []float64{30}, 0, 25 * time.Second, 30 * time.Second, false},
		{"extended by 10", []float64{40}, 0, 35 * time.Second, 40 * time.Second, true},
		{"a smaller grant never shortens", []float64{40, 35}, 0, 35 * time.Second, 40 * time.Second, true},
		{"cancel: kill one grace later", nil, 10 * time.Second, 10 * time.Second, 15 * time.Second, false},
		{"cancel near the end keeps the hard deadline", nil, 28 * time.Second, 28 * time.Second, 30 * time.Second, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Account{LimitS: 30}.Attempt(t0, 5*time.Second)
			moved := false
			for _, g := range c.grants {
				moved = d.Extend(g) || moved
			}
			if c.cancelAt > 0 {
				d.Cancel(t0.Add(c.cancelAt))
			}
			if d.Soft.Sub(t0) != c.soft || d.Hard.Sub(t0) != c.hard || moved != c.moved {
				t.Fatalf("soft %v hard %v moved %v; want %v %v %v", d.Soft.Sub(t0), d.Hard.Sub(t0), moved, c.soft, c.hard, c.moved)
			}
		})
	}
}

func TestRanTo(t *testing.T) {
	hb := 10 * time.Second
	cases := []struct {
		name       string
		base, beat float64
		wall       time.Duration
		want       float64
	}{
		{"heartbeat is the floor", 100, 130, 35 * time.Second, 130},
		{"wall time beyond the heartbeat, capped by the throttle", 100, 110, 60 * time.Second, 118},
		{"no heartbeat: wall time less the timeout", 100, 0, 14 * time.Second, 104},
		{"lost before it started", 100, 0, 5 * time.Second, 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RanTo(c.base, c.beat, c.wall, hb); got != c.want {
				t.Fatalf("RanTo = %v, want %v", got, c.want)
			}
		})
	}
	// Cut off from outside: the work since the later of the attempt's
	// start and its last checkpoint.
	l := Account{UsedS: 50}
	if got := l.LostAt(l.RanUntil(t0, t0.Add(7*time.Second))); got != 7 {
		t.Fatalf("lost %v, want 7", got)
	}
}

func TestJSONShowsGranted(t *testing.T) {
	b, err := json.Marshal(Account{LimitS: 30, ExtendedS: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"granted_s":35`) || !strings.Contains(string(b), `"extended_s":5`) {
		t.Fatalf("%s", b)
	}
	var back Account
	if err := json.Unmarshal(b, &back); err != nil || back.GrantedS() != 35 {
		t.Fatalf("%+v %v", back, err)
	}
}

// TestSafetyTimeoutGrowsWithTheWorkspace is audit #16: the margin for the
// restore and the final save was a fixed 10 minutes, so a 20 GiB
// workspace on a modest store lost every attempt after its agent had
// finished. Both now count at a slow pace.
func TestSafetyTimeoutGrowsWithTheWorkspace(t *testing.T) {
	l := Account{LimitS: 3600}
	small, big := l.SafetyTimeout(time.Minute, 0), l.SafetyTimeout(time.Minute, 20<<30)
	if want := 2 * 640 * time.Second; big-small != want {
		t.Fatalf("20 GiB adds %s; want %s (restore and save at 32 MiB/s)", big-small, want)
	}
}
