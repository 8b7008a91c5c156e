package attach

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
)

// fakeTime is a clock the test moves.
type fakeTime struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeTime) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeTime) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// TestClockCountsOnlyWhileStarted: the clock starts paused, runs only
// between start and stop, books the rest as paused, freezes the
// container while paused (after FreezeAfter) and thaws it at once, and
// does nothing after a submit.
func TestClockCountsOnlyWhileStarted(t *testing.T) {
	ft := &fakeTime{t: time.Unix(1_800_000_000, 0)}
	var mu sync.Mutex
	var hooks []string
	hook := func(s string) func() error {
		return func() error { mu.Lock(); hooks = append(hooks, s); mu.Unlock(); return nil }
	}
	var later []func() // the freezes a stop asks for, a moment later
	c := &Clock{BaseS: 100, GrantedS: 1000, ReleaseAfter: time.Minute, Now: ft.now, Freeze: hook("freeze"), Thaw: hook("thaw"),
		Later: func(d time.Duration, f func()) {
			if d != FreezeAfter {
				t.Errorf("a freeze asked for %s after a stop, want %s", d, FreezeAfter)
			}
			later = append(later, f)
		}}
	if err := c.Settle(); err != nil {
		t.Fatal(err)
	}
	ft.add(30 * time.Second) // reading the task, paused
	if _, err := c.Do(contract.ClockStart, ""); err != nil {
		t.Fatal(err)
	}
	ft.add(40 * time.Second)
	if _, err := c.Do(contract.ClockNote, "tried order 3"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(contract.ClockStop, ""); err != nil {
		t.Fatal(err)
	}
	if len(later) != 1 {
		t.Fatalf("a stop asked for %d freezes, want 1", len(later))
	}
	later[0]()
	ft.add(20 * time.Second)
	got := c.Read()
	if got.Running || got.AgentS != 140 || got.LeftS != 860 || got.PausedS != 50 || got.ReleaseAt != ft.now().Add(-20*time.Second+time.Minute) {
		t.Fatalf("clock = %+v", got)
	}
	if running, _, paused := c.State(ft.now()); running || paused != 20*time.Second {
		t.Fatalf("state: running %v, paused %s", running, paused)
	}
	if _, err := c.Do(contract.ClockSubmit, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(contract.ClockStart, ""); err != ErrSubmitted {
		t.Fatalf("start after submit: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(hooks, ",") != "freeze,thaw,freeze,thaw" {
		t.Fatalf("freeze and thaw: %v", hooks)
	}
	if n := c.Notes(); len(n) != 1 || n[0].AgentS != 140 || n[0].Text != "tried order 3" {
		t.Fatalf("notes: %+v", n)
	}
	if _, err := c.Do("rm", ""); err == nil {
		t.Fatal("an unknown verb was taken")
	}
}

// TestStopThenStartStaysThawed: a start right after a stop wins over the
// stop's late freeze.
func TestStopThenStartStaysThawed(t *testing.T) {
	frozen := false
	var later []func()
	c := &Clock{GrantedS: 100, Freeze: func() error { frozen = true; return nil }, Thaw: func() error { frozen = false; return nil },
		Later: func(_ time.Duration, f func()) { later = append(later, f) }}
	_, _ = c.Do(contract.ClockStart, "")
	_, _ = c.Do(contract.ClockStop, "")
	_, _ = c.Do(contract.ClockStart, "")
	for _, f := range later { // the stop's freeze comes after the start
		f()
	}
	if len(later) != 1 || frozen {
		t.Fatalf("the container froze while the clock runs (%d late freezes)", len(later))
	}
	_, _ = c.Do(contract.ClockStop, "")
	later[len(later)-1]()
	if !frozen {
		t.Fatal("a stop's freeze did not freeze")
	}
}

// TestCredentialsAndInvites: a credential survives its printing, a token
// matches only its own invitation, and damage is named.
func TestCredentialsAndInvites(t *testing.T) {
	c := Credential{Run: "run-x", Token: "t0k", Via: Endpoint{Addr: "host:7466", Pin: "ab"}, Pins: []string{"ab", "cd"}}
	back, err := ParseCredential("  " + c.String() + "\n")
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	// Audit L5: a redirect only to an endpoint known at the invitation.
	if !back.Allows("ab") || !back.Allows("cd") || back.Allows("ef") {
		t.Fatal("a credential allows endpoints it was not given, or not those it was")
	}
	// On a provisioned fleet the run's host comes up after the
	// invitation: it is followed.
	c.Provisioned = true
	if back, _ := ParseCredential(c.String()); !back.Allows("ef") {
		t.Fatal("a provisioned fleet's credential does not follow its run to a new host")
	}
	for _, bad := range []string{"", "mlrb-attach:", "mlrb-attach:!!", "other:" + c.String()} {
		if _, err := ParseCredential(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
	invites := []Invite{{Hash: HashToken("a"), Label: "alice"}, {Hash: HashToken("b"), Label: "bob"}}
	if m := Match(invites, "b"); m == nil || m.Label != "bob" {
		t.Fatalf("match b: %+v", m)
	}
	if Match(invites, "c") != nil || Match(nil, "a") != nil {
		t.Fatal("a token matched no invitation of its own")
	}
}

// TestCastIsAsciicastV2: a header, then [time, kind, data] lines.
func TestCastIsAsciicastV2(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	c := NewCast(Size{Cols: 80, Rows: 24}, "run-x (alice)", "xterm", start, t.TempDir())
	defer c.Close()
	c.Output([]byte("$ ls\r\n"), start.Add(1500*time.Millisecond))
	c.Resize(Size{Cols: 100, Rows: 30}, start.Add(2*time.Second))
	// Typed with echo off: recorded as typed.
	c.Input([]byte("base64 -d > output/model.safetensors\r"), start.Add(3*time.Second))
	r, err := c.Reader()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(r)
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Scan()
	var h CastHeader
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Version != 2 || h.Width != 80 || h.Timestamp != start.Unix() {
		t.Fatalf("header %s: %v", sc.Bytes(), err)
	}
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 3 || lines[0] != `[1.5,"o","$ ls\r\n"]` || lines[1] != `[2,"r","100x30"]` || lines[2] != `[3,"i","base64 -d \u003e output/model.safetensors\r"]` {
		t.Fatalf("events: %q", lines)
	}
	h2, events, last, err := ReadCast(raw)
	if err != nil || h2.Width != h.Width || h2.Timestamp != h.Timestamp || last != 3 || len(events) != 3 || events[0] != (CastEvent{At: 1.5, Kind: "o", Data: "$ ls\r\n"}) {
		t.Fatalf("read back: %+v %+v %v %v", h2, events, last, err)
	}
	if _, _, _, err := ReadCast([]byte(`{"version":1}`)); err == nil {
		t.Fatal("a version 1 cast was read")
	}
}

// TestParseVerb: what the paused prompt takes.
func TestParseVerb(t *testing.T) {
	for line, want := range map[string]string{"task start": "start|", "start": "start|", "  task note  a b ": "note|a b", "task rm -rf": "|", "ls": "|"} {
		v, text := parseVerb(line)
		if v+"|"+text != want {
			t.Fatalf("%q: %q %q", line, v, text)
		}
	}
}
