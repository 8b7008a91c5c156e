// apiSpec is what the gateway knows of one LLM API.

package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/mlrb/mlrb/internal/run/llm"
)

// apiSpec is what the gateway knows of one LLM API: its route, its
// provider, how it bounds and multiplies output, what in it the gateway
// cannot meter, how it is sent and how it says no. Each API is a file of
// its own (chat.go, responses.go, messages.go; what OpenAI's two share in
// openai.go): a new API is a new file and a line in apis.
type apiSpec struct {
	api llm.API
	// path is the route served, after the /v1 the base URLs end in.
	path string
	// anthropic: calls go to gateway.anthropic_url (else openai_url).
	anthropic bool
	// maxTokens are the fields that bound a request's output (the first
	// set counts).
	maxTokens []string
	// choices is how many answers a request asks for (nil: one).
	choices func(body []byte) int64
	// unbounded says why a request brings input the body does not hold
	// ("": it holds all; nil: the API has no such field).
	unbounded func(body []byte) string
	// serverTool tells a tool type the provider runs (it may reach the
	// network and bill outside the ledger) from one the agent runs.
	serverTool func(typ string) bool
	// prepare rewrites an admitted body before it is sent (nil: as is).
	prepare func(c *call)
	// target is where a call to path goes, under the upstream's base URL.
	target func(base, path string) string
	// auth puts the provider's key on the request.
	auth func(h http.Header, key string)
	// errorBody is a refusal in the API's error shape, so that the
	// agent's SDK shows the message.
	errorBody func(kind, msg string) any
}

// apis are the APIs served.
var apis = []*apiSpec{&chatAPI, &responsesAPI, &messagesAPI}

// specAt is the API served at path.
func specAt(path string) (*apiSpec, bool) {
	for _, a := range apis {
		if a.path == path {
			return a, true
		}
	}
	return nil, false
}

// writeAPIError answers in spec's error shape (OpenAI's for a path that
// is no API's).
func writeAPIError(w http.ResponseWriter, spec *apiSpec, status int, kind, msg string) {
	shape := openAIError
	if spec != nil {
		shape = spec.errorBody
	}
	b, _ := json.Marshal(shape(kind, msg))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// maxOutput is the most output a request allows itself (0: unsaid).
func (a *apiSpec) maxOutput(body []byte) int64 {
	for _, f := range a.maxTokens {
		if v := gjson.GetBytes(body, f); v.Exists() && v.Int() > 0 {
			return v.Int()
		}
	}
	return 0
}

// answers is how many answers a request asks for.
func (a *apiSpec) answers(body []byte) int64 {
	if a.choices == nil {
		return 1
	}
	return a.choices(body)
}
