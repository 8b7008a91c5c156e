// chatAPI is OpenAI's chat completions.

package gateway

import (
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/mlrb/mlrb/internal/run/llm"
)

// chatAPI is OpenAI's chat completions: n answers per call, each its own
// output; a stream reports its usage only if asked.
var chatAPI = apiSpec{
	api: llm.ChatCompletions, path: "/v1/chat/completions",
	maxTokens: []string{"max_completion_tokens", "max_tokens"},
	choices: func(body []byte) int64 {
		if v := gjson.GetBytes(body, "n"); v.Exists() && v.Type != gjson.Null {
			return v.Int()
		}
		return 1
	},
	serverTool: openAIServerTool,
	prepare: func(c *call) {
		if !c.rec.Stream || gjson.GetBytes(c.body, "stream_options.include_usage").Bool() {
			return
		}
		// Ask for the stream's usage: the agent then sees one more chunk,
		// with no choices, as it would had it asked.
		if b, err := sjson.SetBytes(c.body, "stream_options.include_usage", true); err == nil {
			c.body = b
		}
	},
	target: openAITarget, auth: openAIAuth, errorBody: openAIError,
}
