package gateway

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
)

// Audit H3, by kind: an attempt's door holds at most MaxConns
// connections (the rest wait in the kernel's backlog, holding nothing of
// the worker), and past MaxRefused refused calls and connections the
// attempt is told, once, naming gateway.max_refused.
func TestDoorAllowance(t *testing.T) {
	var mu sync.Mutex
	var told []string
	allow := &Allowance{MaxRefused: 20, MaxConns: 2, Exceeded: func(why string) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, why)
	}}
	rig := newRigOut(t, llm.Budget{USD: 1}, &llmfake.Fake{Words: 3}, rigOut{pol: &Policy{}, allow: allow})
	for range 25 {
		if status, _ := rig.post(t, "/v1/chat/completions", `{"model":"no-such-model","max_tokens":10,"messages":[]}`); status < 400 {
			t.Fatalf("an unpriced model answered %d", status)
		}
	}
	mu.Lock()
	if len(told) != 1 || !strings.Contains(told[0], "gateway.max_refused") || allow.Refused() != 25 {
		t.Fatalf("told %q after %d refusals", told, allow.Refused())
	}
	mu.Unlock()
	http.DefaultClient.CloseIdleConnections()

	addr := strings.TrimPrefix(rig.url, "http://")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = third.Close() }()
	if _, err := third.Write([]byte("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		_, err := http.ReadResponse(bufio.NewReader(third), nil)
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("a third connection was served while two were open (MaxConns 2): %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	_ = held[0].Close()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the third connection, once one closed: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the third connection was never served after one closed")
	}
	_ = held[1].Close()
}

// TestBackpressureIsNoRefusal: a 429 (a call past those in flight) is
// the door's backpressure, not a refusal: an SDK that retries it is
// well-behaved, however often it does.
func TestBackpressureIsNoRefusal(t *testing.T) {
	allow := &Allowance{MaxRefused: 3}
	gate := make(chan struct{})
	rig := newRigOut(t, llm.Budget{USD: 1}, &llmfake.Fake{Words: 3, Gate: gate}, rigOut{pol: &Policy{}, allow: allow})
	rig.gw.LLM.Bounds = Bounds{InFlight: 1}
	first := make(chan int, 1)
	go func() {
		status, _ := rig.post(t, "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
		first <- status
	}()
	for rig.fake.InFlight() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	for range 5 {
		if status, _ := rig.post(t, "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":10,"messages":[]}`); status != http.StatusTooManyRequests {
			t.Fatalf("a call past the one in flight answered %d", status)
		}
	}
	if n := allow.Refused(); n != 0 {
		t.Fatalf("429s counted as refusals: %d", n)
	}
	close(gate)
	if status := <-first; status != http.StatusOK {
		t.Fatalf("the call held: %d", status)
	}
}

// TestRefusalsCountBytes (audit H2): refusals are bounded in bytes as
// well as in count: a few calls of large bodies the door refuses pass
// gateway.max_refused_mb long before gateway.max_refused.
func TestRefusalsCountBytes(t *testing.T) {
	var mu sync.Mutex
	var told []string
	allow := &Allowance{MaxRefused: 100_000, MaxRefusedBytes: 4 << 20, Exceeded: func(why string) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, why)
	}}
	rig := newRigOut(t, llm.Budget{USD: 1}, &llmfake.Fake{Words: 3}, rigOut{pol: &Policy{}, allow: allow})
	body := `{"model":"no-such-model","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("x", 1<<20) + `"}]}`
	for range 6 {
		if status, _ := rig.post(t, "/v1/chat/completions", body); status < 400 {
			t.Fatalf("an unpriced model answered %d", status)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || !strings.Contains(told[0], "gateway.max_refused_mb") {
		t.Fatalf("told %q after %d refusals of 1 MiB", told, allow.Refused())
	}
}
