package attach

import (
	"net"
	"testing"
)

// TestGate (audit M1, L5): a source's connections are paced before any
// is authenticated, a run holds at most MaxSessionsPerRun sessions, and a
// hello naming no run's id is refused before Temporal is asked.
func TestGate(t *testing.T) {
	var g gate
	a := &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 40000}
	b := &net.TCPAddr{IP: net.ParseIP("192.0.2.8"), Port: 40000}
	allowed := 0
	for range 100 {
		if g.knock(a) {
			allowed++
		}
	}
	if allowed > knockBurst+1 || !g.knock(b) {
		t.Fatalf("a source knocked %d times of 100 at once (burst %d); another source was turned away: %v", allowed, knockBurst, !g.knock(b))
	}
	var leaves []func()
	for range MaxSessionsPerRun {
		leave, ok := g.enter("b/person/t/s0")
		if !ok {
			t.Fatal("a session under the run's limit was refused")
		}
		leaves = append(leaves, leave)
	}
	if _, ok := g.enter("b/person/t/s0"); ok {
		t.Fatalf("a run held %d sessions", MaxSessionsPerRun+1)
	}
	if _, ok := g.enter("other"); !ok {
		t.Fatal("another run's session was refused")
	}
	leaves[0]()
	leaves[0]() // twice: given back once
	if _, ok := g.enter("b/person/t/s0"); !ok {
		t.Fatal("a session given back was not free again")
	}
	if _, ok := g.enter("b/person/t/s0"); ok {
		t.Fatal("a session given back twice freed two")
	}
	for _, id := range []string{"", "../x", "a//b", "x y", string(make([]byte, 600))} {
		if runIDShape(id) == nil {
			t.Fatalf("%q taken as a run's id", id)
		}
	}
	if runIDShape("bench-1/ref/mini_baby_lm/s0") != nil {
		t.Fatal("a benchmark child's id refused")
	}
}
