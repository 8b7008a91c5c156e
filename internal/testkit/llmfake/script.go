// Turn is one scripted answer.

package llmfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// Turn is one scripted answer: text, tool calls, or both. Want are texts
// the request must hold (in any of its strings: messages, tool results,
// instructions); Check, if set, is asked too. A request that fails them
// is answered 400 naming the turn and what it lacked, and the script
// records the failure.
type Turn struct {
	Want  []string
	Check func(body []byte) error
	Text  string
	Calls []ToolCall
	// Status, if set, answers the call with that HTTP error (Text its
	// message), as a provider or the gateway refuses one.
	Status int
}

// ToolCall is a scripted call: Args is marshalled as its JSON.
type ToolCall struct {
	Name string
	Args any
}

// Script is a scripted model. The turn a request gets is its position:
// how many assistant turns the conversation it carries holds, so an
// agent that resumes a conversation from a checkpoint is answered from
// where that conversation was, and one that starts over from the top.
// Next, when set, makes the turn instead (a generated conversation).
type Script struct {
	Turns []Turn
	Next  func(pos int, body []byte) (Turn, error)

	mu       sync.Mutex
	served   []int
	failures []error
}

// Served are the positions answered, in order.
func (s *Script) Served() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.served...)
}

// Err is the first request the script refused, if any.
func (s *Script) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.failures...)
}

func (s *Script) fail(err error) error {
	s.mu.Lock()
	s.failures = append(s.failures, err)
	s.mu.Unlock()
	return err
}

// turn is the answer for body, in API api's shape.
func (s *Script) turn(api string, body []byte) (int, Turn, error) {
	pos := Position(api, body)
	var t Turn
	var err error
	switch {
	case s.Next != nil:
		t, err = s.Next(pos, body)
	case pos >= len(s.Turns):
		err = fmt.Errorf("the script has %d turns; the request is at turn %d", len(s.Turns), pos)
	default:
		t = s.Turns[pos]
	}
	if err == nil {
		err = t.matches(body)
	}
	if err != nil {
		return pos, t, s.fail(fmt.Errorf("llmfake script: turn %d: %w", pos, err))
	}
	s.mu.Lock()
	s.served = append(s.served, pos)
	s.mu.Unlock()
	return pos, t, nil
}

func (t Turn) matches(body []byte) error {
	if len(t.Want) > 0 {
		all := Texts(body)
		for _, w := range t.Want {
			if !strings.Contains(all, w) {
				tail := all[max(0, len(all)-1500):]
				return fmt.Errorf("the request does not hold %q (its strings end: %q)", w, tail)
			}
		}
	}
	if t.Check != nil {
		return t.Check(body)
	}
	return nil
}

// Texts are every string a JSON body holds, one per line.
func Texts(body []byte) string {
	var b strings.Builder
	var walk func(gjson.Result)
	walk = func(r gjson.Result) {
		switch {
		case r.IsObject() || r.IsArray():
			r.ForEach(func(_, v gjson.Result) bool { walk(v); return true })
		case r.Type == gjson.String:
			b.WriteString(r.Str)
			b.WriteByte('\n')
		}
	}
	walk(gjson.ParseBytes(body))
	return b.String()
}

// Position is how many assistant turns the conversation a request
// carries holds: assistant messages (Chat Completions, Messages), or runs
// of assistant items (Responses: a message and the function calls of one
// turn are one).
func Position(api string, body []byte) int {
	n := 0
	if api == "responses" {
		in := false
		gjson.GetBytes(body, "input").ForEach(func(_, it gjson.Result) bool {
			mine := it.Get("role").String() == "assistant" || it.Get("type").String() == "function_call"
			if mine && !in {
				n++
			}
			in = mine
			return true
		})
		return n
	}
	gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
		if m.Get("role").String() == "assistant" {
			n++
		}
		return true
	})
	return n
}

func (c ToolCall) args() string {
	b, err := json.Marshal(c.Args)
	if err != nil || c.Args == nil {
		return "{}"
	}
	return string(b)
}

// scripted answers a call from the script.
func (a *answer) scripted(s *Script, api string, stream bool, body []byte) {
	pos, t, err := s.turn(api, body)
	if err != nil {
		writeError(a.w, http.StatusBadRequest, api == "messages", "invalid_request_error", err.Error())
		return
	}
	if t.Status != 0 {
		writeError(a.w, t.Status, api == "messages", "permission_error", t.Text)
		return
	}
	a.words = max(len(strings.Fields(t.Text)), 1) + 8*len(t.Calls)
	switch api {
	case "chat":
		a.chatTurn(pos, t, stream)
	case "responses":
		a.responsesTurn(pos, t, stream)
	default:
		a.messagesTurn(pos, t, stream)
	}
}
