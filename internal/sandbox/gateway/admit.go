// admit checks the call's model, its provider and its budget, and reserves its worst case.

package gateway

import (
	"fmt"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/mlrb/mlrb/internal/run/llm"
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
	up := l.upstream(c.spec)
	price, ok := l.Prices.Lookup(c.rec.Model)
	switch {
	case !ok:
		l.refuse(w, c, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("model %q has no price in this deployment's price table (gateway.prices, dated %s): a call that cannot be costed is not sent; ask the operator to price it", c.rec.Model, l.Prices.Date))
		return false
	case up.Key == "":
		l.refuse(w, c, http.StatusServiceUnavailable, "api_error", fmt.Sprintf("this worker has no key for %s (%s in agent.env_file)", c.spec.api, up.KeyName))
		return false
	}
	c.price = price
	c.maxOut = c.spec.maxOutput(c.body)
	if c.maxOut == 0 {
		c.maxOut = price.MaxOutput
	}
	// Each of n choices is its own output.
	n := c.spec.answers(c.body)
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
	if c.spec.prepare != nil {
		c.spec.prepare(c)
	}
	return true
}

// maxChoices bounds n (OpenAI's own limit).
const maxChoices = 128

// unmetered says why a call's cost or reach is not the gateway's to
// bound ("": it is): input the body does not hold (a stored Responses
// conversation, a stored prompt), and provider-side tools that fetch
// URLs, search, run code or reach MCP servers (egress past gateway.allow,
// fees outside the ledger) unless the operator allows them.
func (l *LLM) unmetered(r *http.Request, c *call) string {
	if c.spec.unbounded != nil {
		if why := c.spec.unbounded(c.body); why != "" {
			return why
		}
	}
	if why := l.billedOutside(r, c.body); why != "" {
		return why
	}
	if l.ServerTools {
		return ""
	}
	if gjson.GetBytes(c.body, "mcp_servers").Exists() || gjson.GetBytes(c.body, "web_search_options").Exists() {
		return "provider-side tools (MCP servers, web search) reach past the run's egress allow-list and bill outside its ledger; the operator has not allowed them (gateway.server_tools)"
	}
	for _, t := range gjson.GetBytes(c.body, "tools").Array() {
		if typ := t.Get("type").String(); c.spec.serverTool(typ) {
			return fmt.Sprintf("tool type %q runs at the provider (it may fetch URLs, search, run code or reach MCP servers) past the run's egress allow-list and outside its ledger; the operator has not allowed them (gateway.server_tools)", llm.Shorten(typ, 64))
		}
	}
	return ""
}
