// messagesAPI is Anthropic's messages.

package gateway

import (
	"net/http"
	"strings"

	"github.com/mlrb/mlrb/internal/run/llm"
)

// messagesAPI is Anthropic's messages: the key in X-Api-Key, the path
// kept whole, its own error shape, and server tools named by prefix.
var messagesAPI = apiSpec{
	api: llm.Messages, path: "/v1/messages", anthropic: true,
	maxTokens:  []string{"max_tokens"},
	serverTool: anthropicServerTool,
	target:     func(base, path string) string { return strings.TrimSuffix(base, "/") + path },
	auth:       func(h http.Header, key string) { h.Set("X-Api-Key", key) },
	errorBody: func(kind, msg string) any {
		return map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}}
	},
}

// anthropicServerTool tells a tool Anthropic runs (web search and fetch,
// code execution, MCP) from one the agent runs (its own, bash, the text
// editor, computer use: their results come from the agent).
func anthropicServerTool(typ string) bool {
	for _, p := range []string{"web_search", "web_fetch", "code_execution", "mcp"} {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}
