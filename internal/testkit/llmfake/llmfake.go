// The fake provider: OpenAI's and Anthropic's APIs on one listener.

// Package llmfake is an LLM provider at the wire level, for what cannot
// be reached from here: OpenAI's chat completions and Responses APIs and
// Anthropic's messages API, whole or streamed as server-sent events with
// usage in the last event (cache fields included), a 429 with retry-after
// on demand, and a slow stream. The official SDKs talk to it unmodified.
package llmfake

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// Fake is a provider serving both vendors' APIs on one listener.
type Fake struct {
	// OpenAIKey and AnthropicKey are the keys it accepts; any other is
	// answered 401, as the providers do.
	OpenAIKey, AnthropicKey string
	// Words is how many words each answer has (one stream event each).
	Words int
	// Delay is the pause before each streamed word: a slow stream.
	Delay time.Duration
	// Keep: remember each answer's bytes (SHA-256) and each request.
	Keep bool
	// Gate, if set, holds every answer until it is closed.
	Gate chan struct{}
	// Script, if set, answers every call: a scripted model (script.go).
	Script *Script

	limited  atomic.Int64 // 429s still to give
	calls    atomic.Int64
	inFlight atomic.Int64
	maxIn    atomic.Int64
	mu       sync.Mutex
	sent     [][32]byte
	reqs     []Request
	srv      *http.Server
}

// Request is a request the fake received.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
}

// Start serves on a loopback port and returns the base URL.
func (f *Fake) Start() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("fake provider: %w", err)
	}
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(l) }()
	return "http://" + l.Addr().String(), nil
}

// Close stops it.
func (f *Fake) Close() error {
	if f.srv == nil {
		return nil
	}
	return f.srv.Close()
}

// RateLimit makes the next n calls answer 429 with retry-after.
func (f *Fake) RateLimit(n int) { f.limited.Store(int64(n)) }

// Calls is how many calls reached it (refused ones included).
func (f *Fake) Calls() int64 { return f.calls.Load() }

// Sent is the SHA-256 of each answer's bytes, in order (Keep).
func (f *Fake) Sent() [][32]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][32]byte(nil), f.sent...)
}

// Requests are the requests received (Keep).
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.reqs...)
}

// takeLimit takes one of the 429s still to give, if any.
func (f *Fake) takeLimit() bool {
	for {
		n := f.limited.Load()
		if n <= 0 {
			return false
		}
		if f.limited.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// RetryAfter is the wait a 429 asks for, in seconds.
const RetryAfter = 1

// InFlight is how many calls it is answering now.
func (f *Fake) InFlight() int64 { return f.inFlight.Load() }

// MaxInFlight is the most calls it has answered at once.
func (f *Fake) MaxInFlight() int64 { return f.maxIn.Load() }

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for m := f.maxIn.Load(); n > m && !f.maxIn.CompareAndSwap(m, n); m = f.maxIn.Load() {
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if f.Keep {
		f.mu.Lock()
		f.reqs = append(f.reqs, Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		f.mu.Unlock()
	}
	anthropic := strings.HasSuffix(r.URL.Path, "/messages")
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	want := f.OpenAIKey
	if anthropic {
		key, want = r.Header.Get("X-Api-Key"), f.AnthropicKey
	}
	rec := &recorder{w: w, h: sha256.New()}
	defer func() {
		if f.Keep {
			f.mu.Lock()
			f.sent = append(f.sent, [32]byte(rec.h.Sum(nil)))
			f.mu.Unlock()
		}
	}()
	switch {
	case key != want || want == "":
		writeError(rec, http.StatusUnauthorized, anthropic, "authentication_error", "invalid x-api-key / Authorization")
		return
	case f.takeLimit():
		rec.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
		writeError(rec, http.StatusTooManyRequests, anthropic, "rate_limit_error", "rate limited: retry after "+strconv.Itoa(RetryAfter)+" s")
		return
	}
	if f.Gate != nil {
		<-f.Gate
	}
	model := gjson.GetBytes(body, "model").String()
	stream := gjson.GetBytes(body, "stream").Bool()
	in := int64(len(body)/4 + 1)
	a := &answer{w: rec, model: model, words: max(f.Words, 1), delay: f.Delay, in: in}
	if f.Script != nil {
		a.scripted(f.Script, apiOf(r.URL.Path), stream, body)
		return
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		a.chat(stream, gjson.GetBytes(body, "stream_options.include_usage").Bool())
	case strings.HasSuffix(r.URL.Path, "/responses"):
		a.responses(stream)
	case anthropic:
		a.messages(stream)
	default:
		writeError(rec, http.StatusNotFound, false, "not_found", "no route "+r.URL.Path)
	}
}

// recorder hashes what is written.
type recorder struct {
	w http.ResponseWriter
	h hash.Hash
}

func (r *recorder) Header() http.Header { return r.w.Header() }
func (r *recorder) WriteHeader(s int)   { r.w.WriteHeader(s) }
func (r *recorder) Write(b []byte) (int, error) {
	_, _ = r.h.Write(b)
	return r.w.Write(b)
}
func (r *recorder) Flush() {
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeError(w http.ResponseWriter, status int, anthropic bool, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var b []byte
	if anthropic {
		b, _ = json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}})
	} else {
		b, _ = json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": kind, "code": nil}})
	}
	_, _ = w.Write(b)
}

// apiOf names the API a path is of.
func apiOf(path string) string {
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return "chat"
	case strings.HasSuffix(path, "/responses"):
		return "responses"
	}
	return "messages"
}
