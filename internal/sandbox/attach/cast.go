// Cast records a session as asciicast v2 (asciinema's format).

package attach

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mlrb/mlrb/internal/store/keys"
)

// Cast records a session as asciicast v2 (asciinema's format): a header
// line, then one [seconds, "o"|"i"|"r", data] line per output, input or
// resize. What the person types is recorded as they type it ("i"),
// whatever the terminal echoes: input typed with echo off (a paste into
// `stty -echo`) is in the recording too. The recording is spooled to an
// unlinked file, never held in the worker's memory, and a cast past
// MaxCast bytes records no more, saying so.
type Cast struct {
	mu    sync.Mutex
	f     *os.File // nil: the spool could not be made; nothing is kept
	size  int64
	start time.Time
	full  bool
}

// MaxCast bounds one session's recording.
const MaxCast = 64 << 20

// CastHeader is a cast's first line.
type CastHeader struct {
	Version   int               `json:"version"`
	Width     uint              `json:"width"`
	Height    uint              `json:"height"`
	Timestamp int64             `json:"timestamp"`
	Title     string            `json:"title,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
}

// NewCast starts a recording of a terminal of size, spooled under dir
// ("": the system's temporary directory). Close releases it.
func NewCast(size Size, title, term string, start time.Time, dir string) *Cast {
	c := &Cast{start: start}
	if f, err := os.CreateTemp(dir, ".mlrb-cast-"); err == nil {
		_ = os.Remove(f.Name()) // the open file is the spool: nothing is left if the worker dies
		c.f = f
	}
	h := CastHeader{Version: 2, Width: size.Cols, Height: size.Rows, Timestamp: start.Unix(), Title: title}
	if term != "" {
		h.Env = map[string]string{"TERM": term}
	}
	b, _ := json.Marshal(h)
	c.write(append(b, '\n'))
	return c
}

// write appends to the spool; c.mu held (or not yet shared).
func (c *Cast) write(b []byte) {
	if c.f == nil {
		return
	}
	if n, err := c.f.Write(b); err != nil {
		c.full = true
	} else {
		c.size += int64(n)
	}
}

func (c *Cast) event(kind, data string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.full {
		return
	}
	b, _ := json.Marshal([]any{at.Sub(c.start).Seconds(), kind, data})
	if c.size+int64(len(b)) > MaxCast {
		c.full = true
		b, _ = json.Marshal([]any{at.Sub(c.start).Seconds(), "o", "\r\n[mlrb: the recording is full; the session goes on unrecorded]\r\n"})
	}
	c.write(append(b, '\n'))
}

// Output records what the terminal showed.
func (c *Cast) Output(p []byte, at time.Time) { c.event("o", string(p), at) }

// Input records what the person typed or pasted.
func (c *Cast) Input(p []byte, at time.Time) { c.event("i", string(p), at) }

// Resize records a new size.
func (c *Cast) Resize(s Size, at time.Time) { c.event("r", fmtSize(s), at) }

// Reader reads the recording so far from its spool.
func (c *Cast) Reader() (io.Reader, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return nil, errors.New("the recording could not be spooled")
	}
	return io.NewSectionReader(c.f, 0, c.size), nil
}

// Close releases the spool.
func (c *Cast) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		_ = c.f.Close()
		c.f = nil
	}
}

func fmtSize(s Size) string {
	b, _ := json.Marshal(s.Cols)
	r, _ := json.Marshal(s.Rows)
	return string(b) + "x" + string(r)
}

// SessionKey is where a run's session recording is kept in the store.
func SessionKey(runID, name string) string { return keys.Session(runID, name) }

// SessionsPrefix is where a run's session recordings are.
func SessionsPrefix(runID string) string { return keys.Sessions(runID) }

// CastEvent is one event of a recording: its time in seconds from the
// start, its kind ("o" output, "i" input, "r" resize) and its data.
type CastEvent struct {
	At   float64
	Kind string
	Data string
}

// ReadCast reads a recording: its header, its events and its length in
// seconds (the last event's time).
func ReadCast(b []byte) (CastHeader, []CastEvent, float64, error) {
	var h CastHeader
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), MaxCast)
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &h) != nil || h.Version != 2 {
		return h, nil, 0, errors.New("not an asciicast v2 recording")
	}
	var events []CastEvent
	for sc.Scan() {
		var ev []any
		if json.Unmarshal(sc.Bytes(), &ev) != nil || len(ev) != 3 {
			continue
		}
		at, _ := ev[0].(float64)
		kind, _ := ev[1].(string)
		data, _ := ev[2].(string)
		events = append(events, CastEvent{At: at, Kind: kind, Data: data})
	}
	last := 0.0
	if len(events) > 0 {
		last = events[len(events)-1].At
	}
	return h, events, last, sc.Err()
}

// safeLabel is a person's label as it may stand in a recording's name.
func safeLabel(l string) string {
	b := []byte(l)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "person"
	}
	return string(b)
}
