package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// TestBilledOutside (audit M2): input by reference, dearer tiers, longer
// cache writes and unlisted beta headers are refused naming what; inline
// content, the tiers at the table's rates, tool schemas that merely name
// such fields, and listed betas pass.
func TestBilledOutside(t *testing.T) {
	l := &LLM{AnthropicBeta: []string{"prompt-caching-2024-07-31"}}
	for body, want := range map[string]string{
		`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"high"}}]}]}`:                                               "image_url",
		`{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x/y.png"}]}]}`:                                                                                   "image_url",
		`{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-abc"}]}]}`:                                                                                            "file_id",
		`{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://x/doc.pdf"}]}]}`:                                                                                  "file_url",
		`{"model":"claude","messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`:                                                                "source of type \"url\"",
		`{"model":"claude","messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`:                                                                            "source of type \"file\"",
		`{"model":"gpt-4o","service_tier":"priority","messages":[]}`:                                                                                                                                     "service_tier",
		`{"model":"claude","system":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[]}`:                                                                         "ttl",
		`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`:                                                              "",
		`{"model":"gpt-4o","service_tier":"flex","messages":[]}`:                                                                                                                                         "",
		`{"model":"claude","system":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}],"messages":[]}`:                                                                                    "",
		`{"model":"gpt-4o","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"file_id":{"type":"string"},"image_url":{"type":"string"}}}}}]}`: "",
	} {
		r, _ := http.NewRequest(http.MethodPost, "/v1/x", nil)
		got := l.billedOutside(r, []byte(body))
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s:\n  refused %q, want %q", body, got, want)
		}
	}
	for beta, refused := range map[string]bool{"context-1m-2025-08-07": true, "prompt-caching-2024-07-31": false, "prompt-caching-2024-07-31, context-1m-2025-08-07": true} {
		r, _ := http.NewRequest(http.MethodPost, "/v1/messages", nil)
		r.Header.Set("anthropic-beta", beta)
		if got := l.billedOutside(r, []byte(`{"model":"claude","messages":[]}`)); (got != "") != refused {
			t.Errorf("anthropic-beta %q: %q", beta, got)
		}
	}
}
