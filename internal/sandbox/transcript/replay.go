// Replayer: a finished run's calls served back, strictly.

package transcript

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// Replayed are the calls of a transcript a replay serves: the LLM calls
// the provider answered, in order of attempt and seq.
func Replayed(calls []Call) []Call {
	var out []Call
	for _, c := range calls {
		if c.Kind == KindLLM && c.Status == http.StatusOK && c.Error == "" && c.Count <= 1 {
			out = append(out, c)
		}
	}
	return out
}

// exchange is one recorded call: the request as sent, the answer as the
// provider gave it.
type exchange struct {
	call      Call
	req, resp []byte
}

// Replayer answers an agent's LLM calls from a finished run's transcript,
// strictly and in order: each request must be the recorded one (its
// clock's values aside: timestamps and durations differ in every run),
// and is answered with the recorded answer's bytes. A request that
// differs is refused, naming the call and the first place it differs.
type Replayer struct {
	source string
	calls  []exchange

	mu     sync.Mutex
	next   int
	failed error
}

// LoadReplay reads runID's answered LLM calls and their bodies. A call
// whose bodies were not kept whole cannot be replayed: refused, naming it.
func LoadReplay(ctx context.Context, store blob.Store, runID string) (*Replayer, error) {
	all, err := List(ctx, store, runID, 0)
	if err != nil {
		return nil, err
	}
	r := &Replayer{source: runID}
	for _, c := range Replayed(all) {
		if c.BodiesDropped || c.Request == nil || c.Response == nil || c.Request.Truncated || c.Response.Truncated {
			return nil, fmt.Errorf("run %s's call %d (attempt %d) kept only part of its bodies: the transcript cannot be replayed", runID, c.Seq, c.Attempt)
		}
		req, err := ReadBody(ctx, store, runID, c.Request)
		if err != nil {
			return nil, fmt.Errorf("run %s's call %d: %w", runID, c.Seq, err)
		}
		resp, err := ReadBody(ctx, store, runID, c.Response)
		if err != nil {
			return nil, fmt.Errorf("run %s's call %d: %w", runID, c.Seq, err)
		}
		r.calls = append(r.calls, exchange{call: c, req: req, resp: resp})
	}
	if len(r.calls) == 0 {
		return nil, fmt.Errorf("run %s has no answered LLM call to replay", runID)
	}
	return r, nil
}

// Calls is how many calls the transcript holds.
func (r *Replayer) Calls() int { return len(r.calls) }

// Served is how many were answered.
func (r *Replayer) Served() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next
}

// Err is the first refusal, if any.
func (r *Replayer) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// ReplayRefusal opens the message of every refused call: what a reader of
// the replaying run's transcript looks for.
const ReplayRefusal = "replay: "

func (r *Replayer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	if err != nil {
		http.Error(w, "read the request", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed != nil {
		r.refuse(w, req, r.failed)
		return
	}
	n := r.next
	if n >= len(r.calls) {
		r.refuse(w, req, fmt.Errorf("%srun %s's transcript has %d calls; this is call %d, one more than it holds", ReplayRefusal, r.source, len(r.calls), n+1))
		return
	}
	ex := r.calls[n]
	if where := Differs(ex.req, body); where != "" {
		r.refuse(w, req, fmt.Errorf("%scall %d of %d (run %s, attempt %d, seq %d, %s): the request differs from the recorded one at %s",
			ReplayRefusal, n+1, len(r.calls), r.source, ex.call.Attempt, ex.call.Seq, ex.call.API, where))
		return
	}
	r.next++
	if ex.call.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(ex.resp)
}

// refuse answers 400 in the API's error shape, and keeps the first.
func (r *Replayer) refuse(w http.ResponseWriter, req *http.Request, err error) {
	if r.failed == nil {
		r.failed = err
	}
	var b []byte
	if bytes.HasSuffix([]byte(req.URL.Path), []byte("/messages")) {
		b, _ = json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": "invalid_request_error", "message": err.Error()}})
	} else {
		b, _ = json.Marshal(map[string]any{"error": map[string]any{"message": err.Error(), "type": "invalid_request_error", "code": nil}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

// clock matches what differs in every run by nature: RFC 3339 times and
// Go durations.
var clock = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})|\b(\d+h)?(\d+m)?\d+(\.\d+)?(ms|s)\b`)

// Differs is where got differs from want, as JSON with the clock's values
// masked ("" where they agree): the path and both values, shortened.
func Differs(want, got []byte) string {
	var a, b any
	if err := json.Unmarshal(want, &a); err != nil {
		return "the recorded request (not JSON)"
	}
	if err := json.Unmarshal(got, &b); err != nil {
		return "the request's body (not JSON)"
	}
	return differs("$", a, b)
}

func differs(path string, a, b any) string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: recorded an object, sent %s", path, short(b))
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if d := differs(path+"."+k, av[k], bv[k]); d != "" {
				return d
			}
		}
		return ""
	case []any:
		bv, ok := b.([]any)
		if !ok {
			return fmt.Sprintf("%s: recorded a list, sent %s", path, short(b))
		}
		for i := range max(len(av), len(bv)) {
			var x, y any
			if i < len(av) {
				x = av[i]
			}
			if i < len(bv) {
				y = bv[i]
			}
			if d := differs(path+"["+strconv.Itoa(i)+"]", x, y); d != "" {
				return d
			}
		}
		return ""
	case string:
		if bs, ok := b.(string); ok && clock.ReplaceAllString(av, "<clock>") == clock.ReplaceAllString(bs, "<clock>") {
			return ""
		}
	default:
		if a == nil && b == nil {
			return ""
		}
		if ab, err := json.Marshal(a); err == nil {
			if bb, err := json.Marshal(b); err == nil && bytes.Equal(ab, bb) {
				return ""
			}
		}
	}
	return fmt.Sprintf("%s: recorded %s, sent %s", path, short(a), short(b))
}

// short is a value as JSON (control characters escaped), cut to 200
// bytes.
func short(v any) string {
	if v == nil {
		return "nothing"
	}
	b, _ := json.Marshal(v)
	return llm.Shorten(string(b), 200)
}
