// Bounds are what one attempt's calls may take of the worker at once, whatever the agent sends.

package gateway

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Bounds are what one attempt's calls may take of the worker at once,
// whatever the agent sends: the worker's memory stays bounded by the
// attempts it runs, never by what an agent does through its door.
type Bounds struct {
	// InFlight is the calls in progress at once; a call past it is
	// answered 429 at once, its body unread.
	InFlight int64
	// Buffered is the request bytes the calls in progress hold.
	Buffered int64
	// BodyTimeout bounds the time a request's body takes to arrive.
	BodyTimeout time.Duration
}

// DefaultBounds: 8 calls of up to 32 MiB each, 64 MiB in all, each body
// within a minute.
var DefaultBounds = Bounds{InFlight: 8, Buffered: 64 << 20, BodyTimeout: time.Minute}

func (l *LLM) bounds() Bounds {
	b := l.Bounds
	if b.InFlight <= 0 {
		b.InFlight = DefaultBounds.InFlight
	}
	if b.Buffered <= 0 {
		b.Buffered = DefaultBounds.Buffered
	}
	if b.BodyTimeout <= 0 {
		b.BodyTimeout = DefaultBounds.BodyTimeout
	}
	return b
}

// readBody reads a call's body within the attempt's bounds: a call past
// the calls in flight, or whose body the bytes left cannot hold, is
// refused before its body is read, and a body must arrive within the
// body timeout. release gives the call's share back.
func (l *LLM) readBody(w http.ResponseWriter, r *http.Request, c *call, b Bounds) (body []byte, release func(), ok bool) {
	release = func() {}
	if r.ContentLength > MaxRequest {
		l.refuse(w, c, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("a request body may hold at most %d MiB", MaxRequest>>20))
		return nil, release, false
	}
	if !l.inFlight.TryAcquire(1) {
		l.refuse(w, c, http.StatusTooManyRequests, "rate_limit_error", fmt.Sprintf("%d calls of this attempt are in flight already: wait for one to end", b.InFlight))
		return nil, release, false
	}
	share := r.ContentLength
	if share < 0 {
		share = MaxRequest // chunked: the most it may be
	}
	if !l.buffered.TryAcquire(share) {
		l.inFlight.Release(1)
		l.refuse(w, c, http.StatusTooManyRequests, "rate_limit_error", fmt.Sprintf("the calls of this attempt in flight hold %d MiB of requests already: wait for one to end", b.Buffered>>20))
		return nil, release, false
	}
	release = func() {
		l.buffered.Release(share)
		l.inFlight.Release(1)
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(b.BodyTimeout))
	body, err := l.bodies.readAll(r.Body, share, r.ContentLength)
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	if held := int64(len(body)); err == nil && held < share {
		// A chunked body reserved the most it could be: keep what it is.
		l.buffered.Release(share - held)
		share = held
	}
	// What was read counts against the refused bytes' allowance, whole
	// or not.
	switch c.body = body; {
	case err != nil:
		l.refuse(w, c, http.StatusRequestTimeout, "invalid_request_error", fmt.Sprintf("the request body did not arrive whole within %s: %v", b.BodyTimeout, err))
		return nil, release, false
	case int64(len(body)) > share:
		l.refuse(w, c, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("a request body may hold at most %d MiB, and no more than its Content-Length", MaxRequest>>20))
		return nil, release, false
	}
	c.body = nil
	return body, release, true
}

// readAll reads at most limit+1 bytes of r into a buffer of the declared
// length (length, when it is one; a refused call's, reused): a 32 MiB
// body costs 32 MiB, not the twice that io.ReadAll's doubling leaves to
// collect.
func (p *bodyPool) readAll(r io.Reader, limit, length int64) ([]byte, error) {
	if length < 0 || length > limit {
		return io.ReadAll(io.LimitReader(r, limit+1))
	}
	buf := p.get(length)
	n, err := io.ReadFull(r, buf)
	if err != nil {
		return buf[:n], err
	}
	// One byte past the declared length is read, to tell it was longer.
	var extra [1]byte
	if m, _ := r.Read(extra[:]); m > 0 {
		return append(buf, extra[0]), nil
	}
	return buf, nil
}

// bodyPool keeps the buffers of refused calls for the calls after them,
// at most max bytes of them (the bytes an attempt's calls may hold).
type bodyPool struct {
	mu   sync.Mutex
	free [][]byte
	held int64
}

// get is a buffer of length n (and room for one byte more).
func (p *bodyPool) get(n int64) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, b := range p.free {
		if int64(cap(b)) >= n+1 {
			p.free = append(p.free[:i], p.free[i+1:]...)
			p.held -= int64(cap(b))
			return b[:n]
		}
	}
	return make([]byte, n, n+1)
}

// put keeps b for a later call, unless max bytes are kept already.
func (p *bodyPool) put(b []byte, max int64) {
	if cap(b) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held+int64(cap(b)) > max {
		return
	}
	p.free, p.held = append(p.free, b[:0]), p.held+int64(cap(b))
}
