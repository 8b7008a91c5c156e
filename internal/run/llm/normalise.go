// LLM usage normalised across the provider APIs.

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
	// Known: the provider reported usage at all; Final: it reported the
	// call's whole usage (a whole body, or a stream's terminal usage
	// event: chat's usage chunk, Responses' response.completed,
	// Anthropic's message_delta). A stream cut before its terminal event
	// may have billed more than it showed.
	Known bool
	Final bool
}

// FromBody reads the usage of a whole (non-streamed) response.
func FromBody(api API, body []byte) Seen {
	var s Seen
	s.Model = gjson.GetBytes(body, "model").String()
	u := gjson.GetBytes(body, "usage")
	if !u.IsObject() {
		return s
	}
	s.take(api, u)
	s.Final = true
	return s
}

// openAIFields are where OpenAI's two APIs put the same four counts:
// input (cached included), cached input, output, reasoning (of output).
var openAIFields = map[API][4]string{
	ChatCompletions: {"prompt_tokens", "prompt_tokens_details.cached_tokens", "completion_tokens", "completion_tokens_details.reasoning_tokens"},
	Responses:       {"input_tokens", "input_tokens_details.cached_tokens", "output_tokens", "output_tokens_details.reasoning_tokens"},
}

// take reads one usage object. Anthropic streams it in parts: the input
// in message_start, the output (a running total) in message_delta; each
// part overrides what it gives.
func (s *Seen) take(api API, u gjson.Result) {
	s.Known = true
	s.Raw = append(s.Raw, json.RawMessage(u.Raw))
	if f, ok := openAIFields[api]; ok {
		in, cached := u.Get(f[0]).Int(), u.Get(f[1]).Int()
		s.Tokens = Tokens{Input: max(in-cached, 0), CacheRead: cached, Output: u.Get(f[2]).Int(), Reasoning: u.Get(f[3]).Int()}
		return
	}
	for dst, path := range map[*int64]string{&s.Tokens.Input: "input_tokens", &s.Tokens.CacheRead: "cache_read_input_tokens",
		&s.Tokens.CacheWrite: "cache_creation_input_tokens", &s.Tokens.Output: "output_tokens"} {
		// A part that leaves a count out, or gives 0 for it, keeps the
		// count an earlier part gave.
		if v := u.Get(path).Int(); v > 0 {
			*dst = v
		}
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

// event reads one line of the stream: usage rides on a data line, with
// the model that answered beside it (OpenAI's last chunk, Responses'
// response.completed, Anthropic's message_start and message_delta).
func (st *Stream) event(line []byte) {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	ev := gjson.ParseBytes(bytes.TrimSpace(data))
	u, model := ev.Get("usage"), ev.Get("model")
	// Chat's usage chunk and Anthropic's message_delta carry the usage at
	// the top; Responses' terminal events in the response.
	final := u.IsObject()
	switch {
	case st.API == Responses:
		u, model = ev.Get("response.usage"), ev.Get("response.model")
		final = u.IsObject() && ev.Get("type").String() != "response.in_progress"
	case st.API == Messages && !u.IsObject():
		u, model = ev.Get("message.usage"), ev.Get("message.model")
	}
	if m := model.String(); m != "" {
		st.Seen.Model = m
	}
	if u.IsObject() {
		st.Seen.take(st.API, u)
		st.Seen.Final = st.Seen.Final || final
	}
}
