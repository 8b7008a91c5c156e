// What people's sessions may hold of a worker, by kind (audit M1, L5).

package attach

import (
	"errors"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// What people's sessions may hold of a worker, by kind (audit M1, L5):
// a session's queued keystrokes in bytes (frames are cut to
// maxInputFrame, inputQueue of them wait: 1 MiB), a run's sessions at
// once, and a source's connections before any is authenticated (each
// costs a TLS handshake and a Temporal query), with a short hello.
const (
	MaxSessionsPerRun = 4
	maxInputFrame     = 64 << 10
	inputQueue        = 16
	helloTimeout      = 5 * time.Second
	// knocksPerSecond and knockBurst pace one source address's
	// connections; knockSources bounds the addresses remembered.
	knocksPerSecond = 2
	knockBurst      = 10
	knockSources    = 4096
	// resizeEvery coalesces resizes: each is a daemon call and an event
	// of the recording.
	resizeEvery = 100 * time.Millisecond
)

// gate admits connections and sessions (its zero value is ready).
type gate struct {
	mu      sync.Mutex
	sources *lru.Cache[string, *rate.Limiter]
	runs    map[string]int
}

// knock tells whether a connection from addr may say hello now.
func (g *gate) knock(addr net.Addr) bool {
	host := addr.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sources == nil {
		g.sources, _ = lru.New[string, *rate.Limiter](knockSources)
	}
	l, ok := g.sources.Get(host)
	if !ok {
		l = rate.NewLimiter(knocksPerSecond, knockBurst)
		g.sources.Add(host, l)
	}
	return l.Allow()
}

// enter takes one of run's sessions; leave gives it back.
func (g *gate) enter(run string) (leave func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.runs == nil {
		g.runs = map[string]int{}
	}
	if g.runs[run] >= MaxSessionsPerRun {
		return nil, false
	}
	g.runs[run]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.runs[run]--; g.runs[run] <= 0 {
				delete(g.runs, run)
			}
		})
	}, true
}

// queue hands keystrokes to the shell in frames of at most
// maxInputFrame, each a copy (a 1 MiB frame is not held whole); false
// when nobody has read for a minute.
func (ss *session) queue(p []byte) bool {
	for len(p) > 0 {
		n := min(len(p), maxInputFrame)
		select {
		case ss.in <- append([]byte(nil), p[:n]...):
		case <-time.After(time.Minute):
			return false
		}
		p = p[n:]
	}
	return true
}

// resize takes a new size (nil: none, apply one held back) at most every
// resizeEvery; the latest held back is applied at the next frame.
func (ss *session) resize(sz *Size) {
	ss.smu.Lock()
	if sz != nil {
		ss.size, ss.resizeDue = *sz, true
	}
	now := time.Now()
	if !ss.resizeDue || now.Sub(ss.resizedAt) < resizeEvery {
		ss.smu.Unlock()
		return
	}
	ss.resizeDue, ss.resizedAt = false, now
	size, sh := ss.size, ss.sh
	ss.smu.Unlock()
	ss.cast.Resize(size, now)
	if sh != nil {
		_ = sh.Resize(size.Cols, size.Rows)
	}
}

// runIDs is the shape of a run's id (a lone run's, or a benchmark's
// <id>/<agent>/<task>/s<seed>): a hello naming anything else is refused
// without a Temporal query.
var runIDs = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,511}$`)

func runIDShape(id string) error {
	if !runIDs.MatchString(id) || strings.Contains(id, "..") || strings.Contains(id, "//") {
		return errors.New("not a run's id")
	}
	return nil
}
