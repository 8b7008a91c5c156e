// Billing of an LLM call: service tiers and the price table.

package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// What a provider bills that a call's body does not show, refused before
// it reaches the provider (audit M2): the reservation bounds input by the
// body's bytes, and the price table holds one rate per model.

// tiers are the service tiers billed at the table's rates or below.
var tiers = []string{"", "auto", "default", "flex"}

// schemas are a request's top-level fields that describe rather than
// carry input: their property names ("file_id", "image_url") are not
// content parts.
var schemas = []string{"tools", "functions", "tool_choice", "response_format", "text", "metadata"}

// maxJSONDepth bounds the walk over a body's JSON (a body holds messages,
// their content parts and a tool schema or two).
const maxJSONDepth = 64

// billedOutside says why a call would be billed past what the gateway
// reserves and records ("": it is not): input the provider fetches by
// reference (a URL, an uploaded file: egress past gateway.allow, and
// tokens the body's bytes do not bound), a dearer service tier, a cache
// write of a longer life, or a beta header that changes rates and is not
// on the operator's list (gateway.anthropic_beta).
func (l *LLM) billedOutside(r *http.Request, body []byte) string {
	for _, beta := range r.Header.Values("anthropic-beta") {
		for _, b := range strings.Split(beta, ",") {
			if b = strings.TrimSpace(b); b != "" && !slices.Contains(l.AnthropicBeta, b) {
				return fmt.Sprintf("anthropic-beta %q may change what the provider bills (a longer context is billed at higher rates); the operator has not allowed it (gateway.anthropic_beta)", clip(b))
			}
		}
	}
	if tier := gjson.GetBytes(body, "service_tier").String(); !slices.Contains(tiers, tier) {
		return fmt.Sprintf("service_tier %q is billed above the price table's rates: give auto, default or flex", clip(tier))
	}
	return byReference(gjson.Parse(inPlace(body)), 0)
}

// inPlace is body as a string without a copy (gjson.ParseBytes copies:
// 32 MiB for a refused call of 32 MiB). The body is not changed while
// the call is checked.
func inPlace(body []byte) string { return unsafe.String(unsafe.SliceData(body), len(body)) }

// byReference finds, anywhere in v, input the provider would fetch or
// read from its own storage, or a cache write priced above the table's.
func byReference(v gjson.Result, depth int) string {
	if depth > maxJSONDepth {
		return "the request nests deeper than the gateway reads"
	}
	why := ""
	v.ForEach(func(k, x gjson.Result) bool {
		switch key := k.String(); {
		case depth == 0 && slices.Contains(schemas, key):
			// Tool and output schemas name parameters, not input.
		case key == "file_id" || key == "file_url":
			why = fmt.Sprintf("%s brings input the provider reads from its own storage or fetches: not in the request, so neither bounded by the run's budget nor held to gateway.allow; send the content inline", key)
		case key == "image_url" && fetched(x):
			why = "an image_url the provider fetches is egress past gateway.allow and input the budget cannot bound; send the image inline (a data: URL)"
		case key == "source" && (x.Get("type").String() == "url" || x.Get("type").String() == "file"):
			why = fmt.Sprintf("a content source of type %q is fetched or read by the provider: egress past gateway.allow and input the budget cannot bound; send it inline (base64)", x.Get("type").String())
		case key == "cache_control" && x.Get("ttl").Exists() && x.Get("ttl").String() != "5m":
			why = fmt.Sprintf("a cache_control ttl of %q writes the cache at a rate the price table does not hold: leave ttl out (5m)", clip(x.Get("ttl").String()))
		case x.IsObject() || x.IsArray():
			why = byReference(x, depth+1)
		}
		return why == ""
	})
	return why
}

// fetched tells an image_url (a string, or an object with a url) the
// provider fetches, as against a data: URL carried in the body.
func fetched(x gjson.Result) bool {
	u := x.String()
	if x.IsObject() {
		u = x.Get("url").String()
	}
	u = strings.TrimSpace(strings.ToLower(u))
	return u != "" && !strings.HasPrefix(u, "data:")
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
