// Room is a person's attempt on this worker.

package attach

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
)

// Room is a person's attempt on this worker: its clock, the container
// their shells open in, and the brief the prompt shows while the clock
// is paused.
type Room struct {
	RunID   string
	Attempt int
	Clock   *Clock
	Shells  runtime.Shells
	Shell   runtime.ShellSpec
	Brief   string
	// Token is the clock's bearer token, the container's own.
	Token string
	done  chan struct{}
}

// Done is closed when the attempt has ended.
func (r *Room) Done() <-chan struct{} { return r.done }

// ServeHTTP serves the clock to the container's `task` (through the
// door, at contract.ClockPath).
func (r *Room) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	auth := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
	if req.Method != http.MethodPost || subtle.ConstantTimeCompare([]byte(auth), []byte(r.Token)) != 1 {
		http.Error(w, "mlrb clock: POST with this container's token", http.StatusForbidden)
		return
	}
	verb := strings.TrimPrefix(req.URL.Path, contract.ClockPath)
	text, _ := io.ReadAll(io.LimitReader(req.Body, MaxNote+1))
	c, err := r.Clock.Do(verb, string(text))
	if err != nil && !errors.Is(err, ErrSubmitted) && c.Said == "" {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err != nil {
		c.Said = err.Error()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(c)
}

// Rooms are the rooms this worker holds, by run.
type Rooms struct {
	mu sync.Mutex
	m  map[string]*Room
}

// Open holds a room until release is called (its attempt ended).
func (rs *Rooms) Open(r *Room) (release func()) {
	r.done = make(chan struct{})
	rs.mu.Lock()
	if rs.m == nil {
		rs.m = map[string]*Room{}
	}
	rs.m[r.RunID] = r
	rs.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			rs.mu.Lock()
			if rs.m[r.RunID] == r {
				delete(rs.m, r.RunID)
			}
			rs.mu.Unlock()
			close(r.done)
		})
	}
}

// Get is the run's room on this worker (nil: none).
func (rs *Rooms) Get(runID string) *Room {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.m[runID]
}
