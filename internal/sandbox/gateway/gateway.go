// The attempt's gateway: its socket, its routes, and its life.

// Package gateway is an agent's one door out: each attempt's container has
// no network but a loopback shared with a relay (mlrb-agent door), which
// carries every connection to a unix socket this package serves on the
// worker. Here an HTTP proxy lets CONNECT through to the operator's
// allow-list only, and never to anything of ours: loopback, link-local
// (the instance metadata service), this host's own addresses, the
// Temporal frontend, the blob store, the metrics listener. Each
// connection is logged and recorded in the run's transcript. The LLM
// APIs (llm.go) are served on the same door.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/netutil"
	"golang.org/x/sync/semaphore"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/sandbox/gateway/door"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
)

// Gateway serves one attempt's door.
type Gateway struct {
	Policy *Policy
	Log    *zap.Logger
	// Dial connects to an address the policy let through.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// LLM serves the LLM APIs (nil: CONNECT only).
	LLM *LLM
	// Clock serves a person's clock at contract.ClockPath (nil: an agent's
	// attempt, which has none).
	Clock http.Handler
	// Record keeps each connection in the transcript (nil: none).
	Record *transcript.Recorder
	// Allowance bounds the connections open at once and the refusals
	// (nil: the defaults, no one told); the LLM side shares it.
	Allowance *Allowance

	srv  *http.Server
	mu   sync.Mutex
	open map[net.Conn]struct{}
	// closed: no handler starts any more; handlers are those running,
	// each of which may still record its call.
	closed   bool
	handlers sync.WaitGroup
	// tunnels bounds the connections open at once (MaxTunnels).
	tunnels *semaphore.Weighted
}

// Serve answers on l until Close.
func (g *Gateway) Serve(l net.Listener) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return l.Close()
	}
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: MaxHeaderBytes}
	l = netutil.LimitListener(l, g.Allowance.maxConns())
	g.open = map[net.Conn]struct{}{}
	srv := g.srv
	g.mu.Unlock()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the gateway and every connection it carries (an attempt's
// door never outlives it), and returns once every call in progress has
// ended and been handed to the recorder: the transcript is whole after
// Close and the recorder's Wait.
func (g *Gateway) Close() error {
	g.mu.Lock()
	g.closed = true
	for c := range g.open {
		_ = c.Close()
	}
	g.open = nil
	srv := g.srv
	g.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close()
	}
	// A handler's connection is closed, so its upstream call (bound to the
	// request's context) and its splice end.
	g.handlers.Wait()
	return err
}

// enter counts a handler in, unless the gateway is closed.
func (g *Gateway) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.handlers.Add(1)
	return true
}

func (g *Gateway) track(c net.Conn, on bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil {
		return false
	}
	if on {
		g.open[c] = struct{}{}
	} else {
		delete(g.open, c)
	}
	return true
}

// ServeHTTP serves the LLM APIs and lets CONNECT through to what the
// policy allows; anything else (plain HTTP proxying) is refused.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.enter() {
		http.Error(w, "mlrb gateway: the attempt's door is closed", http.StatusServiceUnavailable)
		return
	}
	defer g.handlers.Done()
	if r.Method != http.MethodConnect {
		if g.Clock != nil && r.URL.Host == "" && strings.HasPrefix(r.URL.Path, contract.ClockPath) {
			g.Clock.ServeHTTP(w, r)
			return
		}
		// A proxy-style request for another host is not ours to carry.
		if g.LLM != nil && (r.URL.Host == "" || r.URL.Host == r.Host) {
			g.LLM.ServeHTTP(w, r)
			return
		}
		g.Allowance.refusal(0)
		g.record(transcript.Call{Host: llm.Shorten(r.Host, maxHost), Error: "plain HTTP is not carried: only HTTPS (CONNECT) to the allow-list (gateway.allow)"}, time.Now())
		http.Error(w, "mlrb gateway: only the LLM APIs, and CONNECT host:port to the allow-list (gateway.allow)", http.StatusForbidden)
		return
	}
	start := time.Now()
	host := llm.Shorten(r.Host, maxHost)
	g.mu.Lock()
	if g.tunnels == nil {
		g.tunnels = semaphore.NewWeighted(MaxTunnels)
	}
	tunnels := g.tunnels
	g.mu.Unlock()
	if !tunnels.TryAcquire(1) {
		g.record(transcript.Call{Host: host, Status: http.StatusTooManyRequests, Error: fmt.Sprintf("%d connections of this attempt are open already", MaxTunnels)}, start)
		http.Error(w, fmt.Sprintf("mlrb gateway: %d connections of this attempt are open already", MaxTunnels), http.StatusTooManyRequests)
		return
	}
	defer tunnels.Release(1)
	to, err := g.Policy.Resolve(r.Context(), r.Host)
	if err != nil {
		g.Allowance.refusal(0)
		g.Log.Info("agent connection refused", zap.String("to", g.scrub(host)), zap.Error(errors.New(g.scrub(err.Error()))))
		g.record(transcript.Call{Host: host, Status: http.StatusForbidden, Error: err.Error()}, start)
		http.Error(w, "mlrb gateway: "+err.Error(), http.StatusForbidden)
		return
	}
	dial := g.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 15 * time.Second}).DialContext
	}
	up, err := dial(r.Context(), "tcp", to.String())
	if err != nil {
		g.Log.Info("agent connection failed", zap.String("to", g.scrub(host)), zap.Stringer("addr", to), zap.Error(err))
		g.record(transcript.Call{Host: host, Status: http.StatusBadGateway, Error: err.Error()}, start)
		http.Error(w, "mlrb gateway: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "mlrb gateway: no hijacking", http.StatusInternalServerError)
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if !g.track(up, true) || !g.track(down, true) {
		_ = up.Close()
		_ = down.Close()
		return
	}
	g.Log.Info("agent connection", zap.String("to", g.scrub(host)), zap.Stringer("addr", to))
	_, _ = io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n")
	// What the client sent after its CONNECT line is in rw's buffer.
	out, in := door.Splice(up, rw, down, up)
	_ = up.Close()
	_ = down.Close()
	g.track(up, false)
	g.track(down, false)
	g.Log.Info("agent connection closed", zap.String("to", g.scrub(host)), zap.Int64("sent", out), zap.Int64("received", in), zap.Duration("for", time.Since(start)))
	g.record(transcript.Call{Host: host, Status: http.StatusOK, Sent: out, Received: in}, start)
}

// maxHost bounds a CONNECT target as it is kept (an agent chooses it).
const maxHost = 300

// MaxHeaderBytes bounds a request's headers (the SDKs send a few KiB):
// each connection the allowance lets in may hold that much.
const MaxHeaderBytes = 64 << 10

// MaxTunnels bounds an attempt's open connections through its door.
const MaxTunnels = 64

// scrub masks the run's secrets in what the worker logs of a connection.
func (g *Gateway) scrub(s string) string {
	if g.Record == nil {
		return s
	}
	return g.Record.Scrub(s)
}

// record keeps a connection, or a refusal, in the transcript.
func (g *Gateway) record(c transcript.Call, start time.Time) {
	if g.Record == nil {
		return
	}
	c.Kind, c.Start, c.LatencyMS = transcript.KindConnect, start.UTC(), ms(time.Since(start))
	g.Record.Add(c, nil, nil)
}
