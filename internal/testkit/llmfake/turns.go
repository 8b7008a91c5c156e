// Scripted turns as each API gives them.

package llmfake

import (
	"fmt"
	"time"
)

func callID(pos, i int) string { return fmt.Sprintf("call_%d_%d", pos, i) }

// chatTurn is a scripted turn as Chat Completions gives it: the tool
// calls' arguments streamed in two pieces, as the provider splits them.
func (a *answer) chatTurn(pos int, t Turn, stream bool) {
	id, now := fmt.Sprintf("chatcmpl-script-%d", pos), time.Now().Unix()
	finish := "stop"
	if len(t.Calls) > 0 {
		finish = "tool_calls"
	}
	if !stream {
		msg := map[string]any{"role": "assistant", "content": t.Text}
		var calls []any
		for i, c := range t.Calls {
			calls = append(calls, map[string]any{"id": callID(pos, i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.args()}})
		}
		if calls != nil {
			msg["tool_calls"] = calls
		}
		a.json(map[string]any{"id": id, "object": "chat.completion", "created": now, "model": a.model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}}, "usage": a.chatUsage()})
		return
	}
	a.sseStart()
	chunk := func(delta map[string]any, fin any) map[string]any { return a.chatChunk(id, now, delta, fin) }
	a.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if t.Text != "" {
		a.event("", chunk(map[string]any{"content": t.Text}, nil))
	}
	for i, c := range t.Calls {
		args := c.args()
		half := len(args) / 2
		a.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": callID(pos, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": args[:half]}}}}, nil))
		a.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": args[half:]}}}}, nil))
	}
	a.event("", chunk(map[string]any{}, finish))
	a.chatEnd(id, now, true)
}

// responsesTurn is a scripted turn as the Responses API gives it.
func (a *answer) responsesTurn(pos int, t Turn, stream bool) {
	var output []any
	if t.Text != "" {
		output = append(output, map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", pos), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": t.Text, "annotations": []any{}}}})
	}
	for i, c := range t.Calls {
		output = append(output, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d_%d", pos, i), "call_id": callID(pos, i),
			"name": c.Name, "arguments": c.args(), "status": "completed"})
	}
	resp := a.response("completed", "")
	resp["id"], resp["output"] = fmt.Sprintf("resp_script_%d", pos), output
	if output == nil {
		resp["output"] = []any{}
	}
	if !stream {
		a.json(resp)
		return
	}
	a.sseStart()
	ev := a.sequenced()
	started := a.response("in_progress", "")
	started["id"] = resp["id"]
	ev("response.created", map[string]any{"response": started})
	for i, item := range output {
		ev("response.output_item.added", map[string]any{"output_index": i, "item": item})
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	ev("response.completed", map[string]any{"response": resp})
}

// messagesTurn is a scripted turn as Anthropic's Messages API gives it:
// a tool call's input streamed as partial JSON.
func (a *answer) messagesTurn(pos int, t Turn, stream bool) {
	stop := "end_turn"
	if len(t.Calls) > 0 {
		stop = "tool_use"
	}
	var blocks []any
	if t.Text != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": t.Text})
	}
	for i, c := range t.Calls {
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", pos, i), "name": c.Name, "input": c.Args})
	}
	id := fmt.Sprintf("msg_script_%d", pos)
	msg := func(content []any, out int, stop any) map[string]any { return a.message(id, content, out, stop) }
	if !stream {
		a.json(msg(blocks, a.words, stop))
		return
	}
	a.sseStart()
	a.event("message_start", map[string]any{"type": "message_start", "message": msg([]any{}, 1, nil)})
	i := 0
	if t.Text != "" {
		a.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
		a.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": t.Text}})
		a.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	for k, c := range t.Calls {
		a.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", pos, k), "name": c.Name, "input": map[string]any{}}})
		args := c.args()
		half := len(args) / 2
		for _, part := range []string{args[:half], args[half:]} {
			a.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		a.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	a.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": a.words}})
	a.event("message_stop", map[string]any{"type": "message_stop"})
}
