// OpenAI's server-side tools, refused or billed.

package gateway

import (
	"net/http"
	"strings"
)

// What OpenAI's APIs (chat.go, responses.go) share: the key as a bearer
// token, paths under the base URL without its /v1, the error shape, and
// which tools run at the provider.

func openAITarget(base, path string) string {
	return strings.TrimSuffix(base, "/") + strings.TrimPrefix(path, "/v1")
}

func openAIAuth(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }

func openAIError(kind, msg string) any {
	return map[string]any{"error": map[string]any{"message": msg, "type": kind, "code": kind, "param": nil}}
}

// openAIServerTool: every tool but the agent's own functions runs at
// OpenAI (web search, file search, code interpreter, MCP, computer use
// previews).
func openAIServerTool(typ string) bool { return typ != "" && typ != "function" && typ != "custom" }
