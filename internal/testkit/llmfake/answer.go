// answer writes one call's answer in an API's shape.

package llmfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// answer writes one call's answer in an API's shape.
type answer struct {
	w     http.ResponseWriter
	model string
	words int
	delay time.Duration
	in    int64 // input tokens, from the request's size
}

func (a *answer) word(i int) string { return fmt.Sprintf("w%d ", i) }

func (a *answer) text() string {
	var b strings.Builder
	for i := range a.words {
		b.WriteString(a.word(i))
	}
	return b.String()
}

func (a *answer) json(v any) {
	a.w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(v)
	_, _ = a.w.Write(b)
}

func (a *answer) sseStart() {
	a.w.Header().Set("Content-Type", "text/event-stream")
	a.w.Header().Set("Cache-Control", "no-cache")
	a.w.WriteHeader(http.StatusOK)
}

// event writes one event; name "" writes a data line only, as OpenAI's
// chat stream does.
func (a *answer) event(name string, v any) {
	b, _ := json.Marshal(v)
	if name != "" {
		_, _ = fmt.Fprintf(a.w, "event: %s\n", name)
	}
	_, _ = fmt.Fprintf(a.w, "data: %s\n\n", b)
	if f, ok := a.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (a *answer) pause() {
	if a.delay > 0 {
		time.Sleep(a.delay)
	}
}

func (a *answer) chatUsage() map[string]any {
	cached := a.in / 4
	return map[string]any{"prompt_tokens": a.in, "completion_tokens": a.words, "total_tokens": a.in + int64(a.words),
		"prompt_tokens_details": map[string]any{"cached_tokens": cached}, "completion_tokens_details": map[string]any{"reasoning_tokens": 0}}
}

func (a *answer) chat(stream, includeUsage bool) {
	id, now := "chatcmpl-fake", time.Now().Unix()
	if !stream {
		a.json(map[string]any{"id": id, "object": "chat.completion", "created": now, "model": a.model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": a.text()}, "finish_reason": "stop", "logprobs": nil}},
			"usage":   a.chatUsage()})
		return
	}
	a.sseStart()
	a.event("", a.chatChunk(id, now, map[string]any{"role": "assistant", "content": ""}, nil))
	for i := range a.words {
		a.pause()
		a.event("", a.chatChunk(id, now, map[string]any{"content": a.word(i)}, nil))
	}
	a.event("", a.chatChunk(id, now, map[string]any{}, "stop"))
	a.chatEnd(id, now, includeUsage)
}

// chatChunk is one chunk of Chat Completions stream id.
func (a *answer) chatChunk(id string, now int64, delta map[string]any, finish any) map[string]any {
	return map[string]any{"id": id, "object": "chat.completion.chunk", "created": now, "model": a.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
}

// chatEnd ends Chat Completions stream id: its usage chunk (when asked
// for), then [DONE].
func (a *answer) chatEnd(id string, now int64, usage bool) {
	if usage {
		a.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": now, "model": a.model, "choices": []any{}, "usage": a.chatUsage()})
	}
	_, _ = fmt.Fprint(a.w, "data: [DONE]\n\n")
}

func (a *answer) response(status string, text string) map[string]any {
	cached := a.in / 4
	r := map[string]any{"id": "resp_fake", "object": "response", "created_at": time.Now().Unix(), "model": a.model, "status": status,
		"output": []any{}, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "usage": nil}
	if status == "completed" {
		r["output"] = []any{map[string]any{"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}}
		r["usage"] = map[string]any{"input_tokens": a.in, "input_tokens_details": map[string]any{"cached_tokens": cached},
			"output_tokens": a.words, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": a.in + int64(a.words)}
	}
	return r
}

func (a *answer) responses(stream bool) {
	if !stream {
		a.json(a.response("completed", a.text()))
		return
	}
	a.sseStart()
	ev := a.sequenced()
	ev("response.created", map[string]any{"response": a.response("in_progress", "")})
	for i := range a.words {
		a.pause()
		ev("response.output_text.delta", map[string]any{"item_id": "msg_fake", "output_index": 0, "content_index": 0, "delta": a.word(i)})
	}
	ev("response.completed", map[string]any{"response": a.response("completed", a.text())})
}

// sequenced sends a Responses stream's events, each numbered.
func (a *answer) sequenced() func(kind string, v map[string]any) {
	seq := 0
	return func(kind string, v map[string]any) {
		v["type"], v["sequence_number"] = kind, seq
		seq++
		a.event(kind, v)
	}
}

func (a *answer) messageUsage(out int) map[string]any {
	return map[string]any{"input_tokens": a.in, "output_tokens": out, "cache_creation_input_tokens": 10, "cache_read_input_tokens": a.in / 4}
}

// message is a Messages API message id.
func (a *answer) message(id string, content []any, out int, stop any) map[string]any {
	return map[string]any{"id": id, "type": "message", "role": "assistant", "model": a.model, "content": content,
		"stop_reason": stop, "stop_sequence": nil, "usage": a.messageUsage(out)}
}

func (a *answer) messages(stream bool) {
	if !stream {
		a.json(a.message("msg_fake", []any{map[string]any{"type": "text", "text": a.text()}}, a.words, "end_turn"))
		return
	}
	a.sseStart()
	a.event("message_start", map[string]any{"type": "message_start", "message": a.message("msg_fake", []any{}, 1, nil)})
	a.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	for i := range a.words {
		a.pause()
		a.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": a.word(i)}})
	}
	a.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	a.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": a.words}})
	a.event("message_stop", map[string]any{"type": "message_stop"})
}
