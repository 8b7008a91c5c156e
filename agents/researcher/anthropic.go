// messagesModel speaks Anthropic's Messages API, streamed.

package researcher

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go"
)

// messagesModel speaks Anthropic's Messages API, streamed.
type messagesModel struct {
	c     anthropic.Client
	model string
}

// defaultMaxOutput is the output bound a Messages call must name.
const defaultMaxOutput = 8192

func (m *messagesModel) Send(ctx context.Context, r Request) (Reply, error) {
	max := r.MaxOutput
	if max <= 0 {
		max = defaultMaxOutput
	}
	p := anthropic.MessageNewParams{Model: anthropic.Model(m.model), MaxTokens: max,
		System: []anthropic.TextBlockParam{{Text: r.System}}, Messages: anthropicMessages(r.Messages)}
	for _, t := range r.Tools {
		schema := anthropic.ToolInputSchemaParam{Properties: t.Params["properties"]}
		if req, ok := t.Params["required"].([]string); ok {
			schema.Required = req
		}
		tool := anthropic.ToolUnionParamOfTool(schema, t.Name)
		tool.OfTool.Description = anthropic.String(t.Description)
		p.Tools = append(p.Tools, tool)
	}
	st := m.c.Messages.NewStreaming(ctx, p)
	var acc anthropic.Message
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			return Reply{}, fmt.Errorf("message stream: %w", err)
		}
	}
	if err := st.Err(); err != nil {
		return Reply{}, refused(fmt.Errorf("message: %w", err))
	}
	out := Message{Role: RoleAssistant}
	for _, b := range acc.Content {
		switch b.Type {
		case "text":
			out.Text += b.Text
		case "tool_use":
			out.Calls = append(out.Calls, Call{ID: b.ID, Name: b.Name, Args: string(b.Input)})
		}
	}
	u := acc.Usage
	return Reply{Message: out, Context: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens, Output: u.OutputTokens}, nil
}

// anthropicMessages folds the conversation into Anthropic's turns: tool
// results and the user text after them are one user turn.
func anthropicMessages(msgs []Message) []anthropic.MessageParam {
	var out []anthropic.MessageParam
	add := func(role anthropic.MessageParamRole, b anthropic.ContentBlockParamUnion) {
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, b)
			return
		}
		out = append(out, anthropic.MessageParam{Role: role, Content: []anthropic.ContentBlockParamUnion{b}})
	}
	for _, m := range msgs {
		switch m.Role {
		case RoleUser:
			add(anthropic.MessageParamRoleUser, anthropic.NewTextBlock(m.Text))
		case RoleTool:
			add(anthropic.MessageParamRoleUser, anthropic.NewToolResultBlock(m.CallID, m.Text, m.Error))
		case RoleAssistant:
			if m.Text != "" {
				add(anthropic.MessageParamRoleAssistant, anthropic.NewTextBlock(m.Text))
			}
			for _, c := range m.Calls {
				args := json.RawMessage(c.Args)
				if !json.Valid(args) {
					args = json.RawMessage("{}")
				}
				add(anthropic.MessageParamRoleAssistant, anthropic.NewToolUseBlock(c.ID, args, c.Name))
			}
		}
	}
	return out
}
