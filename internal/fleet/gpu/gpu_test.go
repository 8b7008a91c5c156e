package gpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"
)

func newPool(t *testing.T, o Options) *Pool {
	t.Helper()
	p, err := NewPool(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// clock is a test's time, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestPool(t *testing.T) {
	p := newPool(t, Options{Slots: 8, Devices: []int{3, 1}})
	a, err := p.Acquire("run-a/1", "", 1)
	if err != nil || len(a) != 1 || a[0] != 1 {
		t.Fatalf("Acquire = %v, %v; want [1]", a, err)
	}
	again, _ := p.Acquire("run-a/1", "", 1)
	if again[0] != 1 {
		t.Fatalf("re-acquire under the same token gave %v", again)
	}
	if _, err := p.Acquire("run-b/1", "", 2); !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("over-subscription: %v", err)
	}
	b, err := p.Acquire("run-b/1", "", 1)
	if err != nil || b[0] != 3 {
		t.Fatalf("second lease = %v, %v", b, err)
	}
	if u := p.Occupancy(); u != (Occupancy{SlotsInUse: 2, SlotsFree: 6, DevicesInUse: 2, DevicesFree: 0}) {
		t.Fatalf("usage with two leases: %+v", u)
	}
	p.Release("run-a/1")
	p.Release("run-a/1")
	if u := p.Occupancy(); u != (Occupancy{SlotsInUse: 1, SlotsFree: 7, DevicesInUse: 1, DevicesFree: 1}) {
		t.Fatalf("usage after a release: %+v", u)
	}
	if p.Holder(1) != "" || p.Holder(3) != "run-b/1" {
		t.Fatalf("holders after release: %q %q", p.Holder(1), p.Holder(3))
	}
	cpu := newPool(t, Options{Slots: 1})
	if d, err := cpu.Acquire("cpu", "", 0); err != nil || d != nil {
		t.Fatalf("CPU lease = %v, %v", d, err)
	}
	if _, err := cpu.Acquire("cpu-2", "", 0); !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("a second lease on a one-slot host: %v", err)
	}
}

// TestLeaseExpires: a lease its holder stops renewing (a terminated run,
// a lost answer) frees its slot one TTL later, never before; a renewed
// one lives on.
func TestLeaseExpires(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	p := newPool(t, Options{Slots: 1, Devices: []int{0}, TTL: time.Minute, Now: clk.now})
	if _, err := p.Acquire("dead", "", 1); err != nil {
		t.Fatal(err)
	}
	clk.add(59 * time.Second)
	if _, err := p.Acquire("next", "", 1); !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("within the TTL the slot is held: %v", err)
	}
	clk.add(2 * time.Second)
	if d, err := p.Acquire("next", "", 1); err != nil || d[0] != 0 {
		t.Fatalf("after the TTL: %v, %v", d, err)
	}
	for i := 0; i < 5; i++ {
		clk.add(50 * time.Second)
		if !p.Renew("next") {
			t.Fatal("a renewed lease was lost")
		}
	}
	if p.Renew("dead") || p.Holder(0) != "next" {
		t.Fatalf("holder %q", p.Holder(0))
	}
}

// TestLeasesSurviveARestart: a restarted worker reads its leases and
// honours them for one TTL; a holder that claims its lease keeps it, the
// others lapse. A claim for devices held by another is refused.
func TestLeasesSurviveARestart(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	file := filepath.Join(t.TempDir(), "leases.json")
	o := Options{Slots: 2, Devices: []int{0, 1}, TTL: time.Minute, Now: clk.now, File: file}
	p := newPool(t, o)
	for _, tok := range []string{"a", "b"} {
		if _, err := p.Acquire(tok, "", 1); err != nil {
			t.Fatal(err)
		}
	}
	clk.add(10 * time.Minute) // the worker was down a while
	q := newPool(t, o)
	if len(q.Leases()) != 2 {
		t.Fatalf("restarted with %v", q.Leases())
	}
	if err := q.Claim("a", []int{0}); err != nil {
		t.Fatal(err)
	}
	if err := q.Claim("c", []int{1}); !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("a claim on b's device: %v", err)
	}
	clk.add(61 * time.Second)
	q.Renew("a")
	if l := q.Leases(); len(l) != 1 || l[0].Token != "a" {
		t.Fatalf("after one TTL: %v", l)
	}
	if err := q.Claim("c", []int{1}); err != nil {
		t.Fatalf("a claim on a lapsed device: %v", err)
	}
}

// TestATornLeaseFileIsSetAside is audit #12: a leases.json left empty or
// cut short (a power loss mid-write, a full disk) made NewPool fail, so
// the worker could never start again. It is set aside, named, and the
// pool starts empty and works.
func TestATornLeaseFileIsSetAside(t *testing.T) {
	for name, body := range map[string]string{"empty": "", "cut short": `[{"token":"a","devi`} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "leases.json")
			if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			var aside string
			p, err := NewPool(Options{Slots: 1, Devices: []int{0}, TTL: time.Minute, File: file,
				Torn: func(err error, set string) { aside = set }})
			if err != nil {
				t.Fatalf("NewPool: %v", err)
			}
			if b, err := os.ReadFile(aside); err != nil || string(b) != body {
				t.Fatalf("the torn file was not kept aside (%q): %q, %v", aside, b, err)
			}
			if _, err := p.Acquire("x", "", 1); err != nil {
				t.Fatal(err)
			}
			q, err := NewPool(Options{Slots: 1, Devices: []int{0}, TTL: time.Minute, File: file})
			if err != nil || len(q.Leases()) != 1 {
				t.Fatalf("the lease written after: %v, %v", q.Leases(), err)
			}
		})
	}
}

// TestReclaimFreesOnlyEndedOwners: a slot whose owner has ended (a
// terminated run) is free at once, long before its TTL; live owners and
// leases without an owner keep theirs, and the freed lease survives no
// restart.
func TestReclaimFreesOnlyEndedOwners(t *testing.T) {
	file := filepath.Join(t.TempDir(), "leases.json")
	p := newPool(t, Options{Slots: 3, Devices: []int{0, 1, 2}, TTL: time.Hour, File: file})
	for _, l := range []struct{ token, owner string }{{"a/1", "run-a/x1"}, {"b/1", "run-b/y1"}, {"c/1", ""}} {
		if _, err := p.Acquire(l.token, l.owner, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Acquire("a/2", "run-a/x2", 1); !errors.Is(err, ErrNoCapacity) {
		t.Fatalf("full pool: %v", err)
	}
	var asked []string
	n := p.Reclaim(func(owner string) bool { asked = append(asked, owner); return owner == "run-a/x1" })
	if n != 1 || len(asked) != 2 {
		t.Fatalf("Reclaim freed %d, asked %v; want 1 freed, 2 owners asked", n, asked)
	}
	if d, err := p.Acquire("a/2", "run-a/x2", 1); err != nil || d[0] != 0 {
		t.Fatalf("after the reclaim the ended run's device is free: %v, %v", d, err)
	}
	again, err := NewPool(Options{Slots: 3, Devices: []int{0, 1, 2}, TTL: time.Hour, File: file})
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, l := range again.Leases() {
		tokens = append(tokens, l.Token+"="+l.Owner)
	}
	sort.Strings(tokens)
	if fmt.Sprint(tokens) != "[a/2=run-a/x2 b/1=run-b/y1 c/1=]" {
		t.Fatalf("leases after a restart: %v", tokens)
	}
}
