package gateway

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/mlrb/mlrb/internal/llm"
)

// admit checks the call's model, its provider and its budget, and
// reserves its worst case.
func (l *LLM) admit(w http.ResponseWriter, r *http.Request, c *call) bool {
	c.rec.Headers = keptHeaders(r.Header)
	if err := llm.CheckRequest(c.body); err != nil {
		l.refuse(w, c, http.StatusBadRequest, "invalid_request_error", err.Error())
		return false
	}
	model := gjson.GetBytes(c.body, "model").String()
	c.rec.Model = llm.Shorten(model, llm.MaxModelName)
	c.rec.Stream = gjson.GetBytes(c.body, "stream").Bool()
	if err := llm.CheckModelName(model); err != nil {
		l.refuse(w, c, http.StatusBadRequest, "invalid_request_error", err.Error())
		return false
	}
	if why := l.unmetered(r, c); why != "" {
		l.refuse(w, c, http.StatusBadRequest, "invalid_request_error", why)
		return false
	}
	up := l.upstream(c.api)
	price, ok := l.Prices.Lookup(c.rec.Model)
	switch {
	case !ok:
		l.refuse(w, c, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("model %q has no price in this deployment's price table (gateway.prices, dated %s): a call that cannot be costed is not sent; ask the operator to price it", c.rec.Model, l.Prices.Date))
		return false
	case up.Key == "":
		l.refuse(w, c, http.StatusServiceUnavailable, "api_error", fmt.Sprintf("this worker has no key for %s (%s in agent.env_file)", c.api, up.KeyName))
		return false
	}
	c.price = price
	c.maxOut = maxOutput(c.api, c.body)
	if c.maxOut == 0 {
		c.maxOut = price.MaxOutput
	}
	// Each of n choices is its own output.
	n := choices(c.api, c.body)
	if n < 1 || n > maxChoices {
		l.refuse(w, c, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("n must be 1 to %d", maxChoices))
		return false
	}
	c.maxOut *= n
	if c.maxOut == 0 && l.Meter.Budget().Set() {
		l.refuse(w, c, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("the run has an LLM budget and model %s has no max_output_tokens in the price table: set the request's max tokens", c.rec.Model))
		return false
	}
	// A token is at least a byte of text: the body's size bounds its input.
	in := int64(len(c.body))
	hold, err := l.Meter.Reserve(price.Worst(in, c.maxOut), in+c.maxOut, price.Worst(in, 0), in)
	if err != nil {
		l.refuse(w, c, http.StatusForbidden, "permission_error", err.Error())
		return false
	}
	c.hold = hold
	if c.api == llm.ChatCompletions && c.rec.Stream && !gjson.GetBytes(c.body, "stream_options.include_usage").Bool() {
		// The stream's usage comes only if asked for: ask. The agent then
		// sees one more chunk, with no choices, as it would had it asked.
		if b, err := sjson.SetBytes(c.body, "stream_options.include_usage", true); err == nil {
			c.body = b
		}
	}
	return true
}

// maxChoices bounds n (OpenAI's own limit).
const maxChoices = 128

// choices is how many answers a request asks for (chat's n; 1 else).
func choices(api llm.API, body []byte) int64 {
	if v := gjson.GetBytes(body, "n"); api == llm.ChatCompletions && v.Exists() && v.Type != gjson.Null {
		return v.Int()
	}
	return 1
}

// unmetered says why a call's cost or reach is not the gateway's to
// bound ("": it is): input the body does not hold (a stored Responses
// conversation, a stored prompt), and provider-side tools that fetch
// URLs, search, run code or reach MCP servers (egress past gateway.allow,
// fees outside the ledger) unless the operator allows them.
func (l *LLM) unmetered(r *http.Request, c *call) string {
	if c.api == llm.Responses {
		for _, f := range []string{"previous_response_id", "conversation", "prompt"} {
			if v := gjson.GetBytes(c.body, f); v.Exists() && v.Type != gjson.Null {
				return fmt.Sprintf("%s brings input this request does not hold, which the run's budget cannot bound: send the whole input", f)
			}
		}
	}
	if l.ServerTools {
		return ""
	}
	if gjson.GetBytes(c.body, "mcp_servers").Exists() || gjson.GetBytes(c.body, "web_search_options").Exists() {
		return "provider-side tools (MCP servers, web search) reach past the run's egress allow-list and bill outside its ledger; the operator has not allowed them (gateway.server_tools)"
	}
	for _, t := range gjson.GetBytes(c.body, "tools").Array() {
		typ := t.Get("type").String()
		client := typ == "" || typ == "function" || typ == "custom" || (c.api == llm.Messages && !serverTool(typ))
		if !client {
			return fmt.Sprintf("tool type %q runs at the provider (it may fetch URLs, search, run code or reach MCP servers) past the run's egress allow-list and outside its ledger; the operator has not allowed them (gateway.server_tools)", llm.Shorten(typ, 64))
		}
	}
	return ""
}

// serverTool tells an Anthropic tool the provider runs (web search and
// fetch, code execution, MCP) from one the agent runs (its own, bash,
// the text editor, computer use: their results come from the agent).
func serverTool(typ string) bool {
	for _, p := range []string{"web_search", "web_fetch", "code_execution", "mcp"} {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// maxOutput is the most output a request allows itself (0: unsaid).
func maxOutput(api llm.API, body []byte) int64 {
	fields := map[llm.API][]string{
		llm.ChatCompletions: {"max_completion_tokens", "max_tokens"},
		llm.Responses:       {"max_output_tokens"},
		llm.Messages:        {"max_tokens"},
	}[api]
	for _, f := range fields {
		if v := gjson.GetBytes(body, f); v.Exists() && v.Int() > 0 {
			return v.Int()
		}
	}
	return 0
}
