package attach

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// Cast records a session as asciicast v2 (asciinema's format): a header
// line, then one [seconds, "o"|"r", data] line per output or resize.
// What the person types is recorded as the terminal echoes it, never as
// keystrokes. A cast past MaxCast bytes records no more, saying so.
type Cast struct {
	mu    sync.Mutex
	buf   bytes.Buffer
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

// NewCast starts a recording of a terminal of size.
func NewCast(size Size, title, term string, start time.Time) *Cast {
	c := &Cast{start: start}
	h := CastHeader{Version: 2, Width: size.Cols, Height: size.Rows, Timestamp: start.Unix(), Title: title}
	if term != "" {
		h.Env = map[string]string{"TERM": term}
	}
	b, _ := json.Marshal(h)
	c.buf.Write(append(b, '\n'))
	return c
}

func (c *Cast) event(kind, data string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.full {
		return
	}
	b, _ := json.Marshal([]any{at.Sub(c.start).Seconds(), kind, data})
	if c.buf.Len()+len(b) > MaxCast {
		c.full = true
		b, _ = json.Marshal([]any{at.Sub(c.start).Seconds(), "o", "\r\n[mlrb: the recording is full; the session goes on unrecorded]\r\n"})
	}
	c.buf.Write(append(b, '\n'))
}

// Output records what the terminal showed.
func (c *Cast) Output(p []byte, at time.Time) { c.event("o", string(p), at) }

// Resize records a new size.
func (c *Cast) Resize(s Size, at time.Time) { c.event("r", fmtSize(s), at) }

// Bytes is the recording so far.
func (c *Cast) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

func fmtSize(s Size) string {
	b, _ := json.Marshal(s.Cols)
	r, _ := json.Marshal(s.Rows)
	return string(b) + "x" + string(r)
}

// SessionKey is where a run's session recording is kept in the store.
func SessionKey(runID, name string) string { return blob.RunPrefix(runID) + "sessions/" + name }

// SessionsPrefix is where a run's session recordings are.
func SessionsPrefix(runID string) string { return blob.RunPrefix(runID) + "sessions/" }

// CastEvent is one event of a recording: its time in seconds from the
// start, its kind ("o" output, "r" resize) and its data.
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
