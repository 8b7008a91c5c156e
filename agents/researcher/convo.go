// The agent's own provider-neutral conversation: messages, roles, compaction.

// Package researcher is mlrb's own LLM research agent: a tool loop
// (shell, python, files, search, background jobs, submit) that talks to
// the run's gateway through the official SDKs, keeps its whole state in
// the workspace after every step so that every checkpoint holds its
// reasoning, and resumes the same conversation on a resumed attempt.
package researcher

import (
	"fmt"
	"strings"
)

// Roles of a message in the agent's own, provider-neutral conversation.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of the conversation as the agent keeps it: each
// provider's request is built from these, so a state file written under
// one API reads under any.
type Message struct {
	Role string `json:"role"`
	Text string `json:"text,omitempty"`
	// Calls are an assistant turn's tool calls.
	Calls []Call `json:"calls,omitempty"`
	// CallID and Tool name the call a tool message answers.
	CallID string `json:"call_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// Error: the tool failed (Anthropic's is_error).
	Error bool `json:"error,omitempty"`
}

// Call is a tool call as the model made it: Args is its JSON.
type Call struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Args string `json:"args"`
}

// size is the message's text in bytes, what a request carries of it.
func (m Message) size() int {
	n := len(m.Text) + len(m.Tool) + len(m.CallID)
	for _, c := range m.Calls {
		n += len(c.ID) + len(c.Name) + len(c.Args)
	}
	return n
}

// pending are the calls of the last assistant turn that no tool message
// answers: a crash came between a call and its result.
func pending(msgs []Message) []Call {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant {
			last = i
			break
		}
	}
	if last < 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range msgs[last+1:] {
		if m.Role == RoleTool {
			answered[m.CallID] = true
		}
	}
	var out []Call
	for _, c := range msgs[last].Calls {
		if !answered[c.ID] {
			out = append(out, c)
		}
	}
	return out
}

// clip keeps text's head and tail within limit bytes, naming where the
// whole is kept: a long tool output costs the context a pointer, not its
// size.
func clip(text string, limit int, full string) string {
	if len(text) <= limit {
		return text
	}
	head, tail := limit*2/3, limit/3
	cut := len(text) - head - tail
	note := fmt.Sprintf("\n[... %d bytes cut; the whole output is in %s: read it with read_file or search it with search_files ...]\n", cut, full)
	return validUTF8(text[:head]) + note + validUTF8(text[len(text)-tail:])
}

// validUTF8 drops the bytes of a rune a cut split.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "") }
