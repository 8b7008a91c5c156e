package llm

import (
	"bytes"
	"encoding/json"

	"github.com/tidwall/gjson"
)

// API is one of the provider APIs the gateway serves.
type API string

// The APIs the gateway serves.
const (
	ChatCompletions API = "openai.chat.completions"
	Responses       API = "openai.responses"
	Messages        API = "anthropic.messages"
)

// Seen is what a response said of its usage: the tokens, normalised, and
// the provider's own usage objects as they came (raw).
type Seen struct {
	Tokens Tokens
	Raw    []json.RawMessage
	Model  string
	// Known: the provider reported usage at all.
	Known bool
}

// FromBody reads the usage of a whole (non-streamed) response.
func FromBody(api API, body []byte) Seen {
	var s Seen
	s.Model = gjson.GetBytes(body, "model").String()
	u := gjson.GetBytes(body, "usage")
	if !u.IsObject() {
		return s
	}
	s.take(api, u, false)
	return s
}

// take reads one usage object. Anthropic streams it in parts: the input
// in message_start, the output (a running total) in message_delta; each
// part overrides what it gives.
func (s *Seen) take(api API, u gjson.Result, partial bool) {
	s.Known = true
	s.Raw = append(s.Raw, json.RawMessage(u.Raw))
	n := func(path string) (int64, bool) {
		r := u.Get(path)
		return r.Int(), r.Exists()
	}
	switch api {
	case ChatCompletions:
		in, _ := n("prompt_tokens")
		cached, _ := n("prompt_tokens_details.cached_tokens")
		out, _ := n("completion_tokens")
		reason, _ := n("completion_tokens_details.reasoning_tokens")
		s.Tokens = Tokens{Input: max(in-cached, 0), CacheRead: cached, Output: out, Reasoning: reason}
	case Responses:
		in, _ := n("input_tokens")
		cached, _ := n("input_tokens_details.cached_tokens")
		out, _ := n("output_tokens")
		reason, _ := n("output_tokens_details.reasoning_tokens")
		s.Tokens = Tokens{Input: max(in-cached, 0), CacheRead: cached, Output: out, Reasoning: reason}
	case Messages:
		set := func(dst *int64, path string) {
			if v, ok := n(path); ok && (!partial || v > 0) {
				*dst = v
			}
		}
		set(&s.Tokens.Input, "input_tokens")
		set(&s.Tokens.CacheRead, "cache_read_input_tokens")
		set(&s.Tokens.CacheWrite, "cache_creation_input_tokens")
		set(&s.Tokens.Output, "output_tokens")
	}
}

// Stream reads the usage of a server-sent event stream as its bytes pass
// (an io.Writer), holding no more than the line in progress.
type Stream struct {
	API  API
	Seen Seen
	line []byte
}

// maxLine bounds the line in progress: an event larger than this (a huge
// delta) is skipped, as usage never rides on one.
const maxLine = 4 << 20

func (st *Stream) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(st.line)+len(p) <= maxLine {
				st.line = append(st.line, p...)
			} else {
				st.line = st.line[:0:0]
			}
			return n, nil
		}
		if len(st.line)+i <= maxLine {
			st.line = append(st.line, p[:i]...)
			st.event(st.line)
		}
		st.line = st.line[:0]
		p = p[i+1:]
	}
	return n, nil
}

// event reads one line of the stream: usage rides on a data line.
func (st *Stream) event(line []byte) {
	line = bytes.TrimRight(line, "\r")
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) && !bytes.Contains(data, []byte(`"model"`)) {
		return
	}
	ev := gjson.ParseBytes(bytes.TrimSpace(data))
	var u gjson.Result
	switch st.API {
	case ChatCompletions:
		u = ev.Get("usage")
		if m := ev.Get("model").String(); m != "" {
			st.Seen.Model = m
		}
	case Responses:
		u = ev.Get("response.usage")
		if m := ev.Get("response.model").String(); m != "" {
			st.Seen.Model = m
		}
	case Messages:
		u = ev.Get("usage")
		if !u.IsObject() {
			u = ev.Get("message.usage")
		}
		if m := ev.Get("message.model").String(); m != "" {
			st.Seen.Model = m
		}
	}
	if u.IsObject() {
		st.Seen.take(st.API, u, st.API == Messages)
	}
}
