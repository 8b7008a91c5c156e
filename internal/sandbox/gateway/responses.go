// responsesAPI is OpenAI's Responses.

package gateway

import (
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/mlrb/mlrb/internal/run/llm"
)

// responsesAPI is OpenAI's Responses: input may live at OpenAI (a stored
// conversation, a stored prompt), which no body bounds.
var responsesAPI = apiSpec{
	api: llm.Responses, path: "/v1/responses",
	maxTokens: []string{"max_output_tokens"},
	unbounded: func(body []byte) string {
		for _, f := range []string{"previous_response_id", "conversation", "prompt"} {
			if v := gjson.GetBytes(body, f); v.Exists() && v.Type != gjson.Null {
				return fmt.Sprintf("%s brings input this request does not hold, which the run's budget cannot bound: send the whole input", f)
			}
		}
		return ""
	},
	serverTool: openAIServerTool,
	target:     openAITarget, auth: openAIAuth, errorBody: openAIError,
}
