// The model interface of the research agent, over the three provider APIs.

package researcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

// APIs the agent speaks: OpenAI's Chat Completions and Responses,
// Anthropic's Messages.
const (
	APIChat      = "chat"
	APIResponses = "responses"
	APIMessages  = "messages"
)

// ToolSpec is a tool as the model is told of it: Params is a JSON
// Schema object.
type ToolSpec struct {
	Name, Description string
	Params            map[string]any
}

// Request is one call: the system prompt, the conversation, the tools
// and the output bound.
type Request struct {
	System    string
	Messages  []Message
	Tools     []ToolSpec
	MaxOutput int64
}

// Reply is the model's turn and the usage the provider reported for it:
// Context is every input token of the request (cached ones included),
// what its window holds.
type Reply struct {
	Message Message
	Context int64
	Output  int64
}

// Model is one provider's API, streamed.
type Model interface {
	Send(ctx context.Context, r Request) (Reply, error)
}

// ErrRefused: the gateway refused the call for the run's LLM budget, or
// the attempt's token; no later call would be admitted either.
var ErrRefused = errors.New("the gateway refused the call (the run's LLM budget is spent, or the token is not this attempt's)")

// refused maps the gateway's refusal of a call for the budget (403)
// or an unknown token (401) to ErrRefused; other errors pass.
func refused(err error) error {
	var oe *openai.Error
	var ae *anthropic.Error
	status := 0
	switch {
	case errors.As(err, &oe):
		status = oe.StatusCode
	case errors.As(err, &ae):
		status = ae.StatusCode
	}
	if status == http.StatusForbidden || status == http.StatusUnauthorized {
		return fmt.Errorf("%w (%v)", ErrRefused, err)
	}
	return err
}

// callTimeout bounds one streamed call: a stalled stream is a failed
// call, retried, not a stalled agent.
const callTimeout = 10 * time.Minute

// Open is the model a provider and API name, with the key and the base
// URL the gateway sets (OPENAI_API_KEY and OPENAI_BASE_URL, ANTHROPIC_*,
// which the SDKs read). api "" is the provider's default: Chat
// Completions for OpenAI, Messages for Anthropic.
func Open(provider, api, model string) (Model, string, error) {
	switch provider {
	case "openai":
		if api == "" {
			api = APIChat
		}
		if api != APIChat && api != APIResponses {
			return nil, "", fmt.Errorf("api %q: OpenAI's are %s and %s", api, APIChat, APIResponses)
		}
		c := openai.NewClient(ooption.WithAPIKey(os.Getenv("OPENAI_API_KEY")), ooption.WithMaxRetries(4), ooption.WithRequestTimeout(callTimeout))
		if api == APIResponses {
			return &responsesModel{c: c, model: model}, api, nil
		}
		return &chatModel{c: c, model: model}, api, nil
	case "anthropic":
		if api != "" && api != APIMessages {
			return nil, "", fmt.Errorf("api %q: Anthropic's is %s", api, APIMessages)
		}
		c := anthropic.NewClient(aoption.WithAPIKey(os.Getenv("ANTHROPIC_API_KEY")), aoption.WithMaxRetries(4), aoption.WithRequestTimeout(callTimeout))
		return &messagesModel{c: c, model: model}, APIMessages, nil
	}
	return nil, "", fmt.Errorf("provider %q: the agent speaks openai or anthropic (PROVIDER, from the agent's definition)", provider)
}
