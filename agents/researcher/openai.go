// chatModel speaks Chat Completions, streamed with usage in the last chunk.

package researcher

import (
	"context"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// chatModel speaks Chat Completions, streamed with usage in the last
// chunk.
type chatModel struct {
	c     openai.Client
	model string
}

func (m *chatModel) Send(ctx context.Context, r Request) (Reply, error) {
	p := openai.ChatCompletionNewParams{Model: m.model, Messages: chatMessages(r),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}}
	if r.MaxOutput > 0 {
		p.MaxCompletionTokens = openai.Int(r.MaxOutput)
	}
	for _, t := range r.Tools {
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: shared.FunctionParameters(t.Params)}))
	}
	st := m.c.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		return Reply{}, refused(fmt.Errorf("chat completion: %w", err))
	}
	if len(acc.Choices) == 0 {
		return Reply{}, fmt.Errorf("chat completion: the answer has no choice")
	}
	msg := acc.Choices[0].Message
	out := Message{Role: RoleAssistant, Text: msg.Content}
	for _, tc := range msg.ToolCalls {
		out.Calls = append(out.Calls, Call{ID: tc.ID, Name: tc.Function.Name, Args: tc.Function.Arguments})
	}
	return Reply{Message: out, Context: acc.Usage.PromptTokens, Output: acc.Usage.CompletionTokens}, nil
}

func chatMessages(r Request) []openai.ChatCompletionMessageParamUnion {
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(r.System)}
	for _, m := range r.Messages {
		switch m.Role {
		case RoleUser:
			msgs = append(msgs, openai.UserMessage(m.Text))
		case RoleTool:
			msgs = append(msgs, openai.ToolMessage(m.Text, m.CallID))
		case RoleAssistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Text != "" {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, c := range m.Calls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Args}}})
			}
			msgs = append(msgs, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	return msgs
}

// responsesModel speaks the Responses API, stateless: the whole input
// every call (store off), as the gateway meters only what a body holds.
type responsesModel struct {
	c     openai.Client
	model string
}

func (m *responsesModel) Send(ctx context.Context, r Request) (Reply, error) {
	p := responses.ResponseNewParams{Model: m.model, Instructions: openai.String(r.System), Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responsesInput(r.Messages)}}
	if r.MaxOutput > 0 {
		p.MaxOutputTokens = openai.Int(r.MaxOutput)
	}
	for _, t := range r.Tools {
		tool := responses.ToolParamOfFunction(t.Name, t.Params, false)
		tool.OfFunction.Description = openai.String(t.Description)
		p.Tools = append(p.Tools, tool)
	}
	st := m.c.Responses.NewStreaming(ctx, p)
	var done *responses.Response
	for st.Next() {
		if ev := st.Current(); ev.Type == "response.completed" {
			resp := ev.AsResponseCompleted().Response
			done = &resp
		}
	}
	if err := st.Err(); err != nil {
		return Reply{}, refused(fmt.Errorf("response: %w", err))
	}
	if done == nil {
		return Reply{}, fmt.Errorf("response: the stream ended before response.completed")
	}
	out := Message{Role: RoleAssistant}
	for _, item := range done.Output {
		switch item.Type {
		case "message":
			for _, c := range item.AsMessage().Content {
				out.Text += c.Text
			}
		case "function_call":
			fc := item.AsFunctionCall()
			out.Calls = append(out.Calls, Call{ID: fc.CallID, Name: fc.Name, Args: fc.Arguments})
		}
	}
	return Reply{Message: out, Context: done.Usage.InputTokens, Output: done.Usage.OutputTokens}, nil
}

func responsesInput(msgs []Message) responses.ResponseInputParam {
	var in responses.ResponseInputParam
	for _, m := range msgs {
		switch m.Role {
		case RoleUser:
			in = append(in, responses.ResponseInputItemParamOfMessage(m.Text, responses.EasyInputMessageRoleUser))
		case RoleTool:
			item := responses.ResponseInputItemParamOfFunctionCallOutput(m.Text)
			item.OfFunctionCallOutput.CallID = openai.String(m.CallID)
			in = append(in, item)
		case RoleAssistant:
			if m.Text != "" {
				in = append(in, responses.ResponseInputItemParamOfMessage(m.Text, responses.EasyInputMessageRoleAssistant))
			}
			for _, c := range m.Calls {
				in = append(in, responses.ResponseInputItemParamOfFunctionCall(c.Args, c.ID, c.Name))
			}
		}
	}
	return in
}
