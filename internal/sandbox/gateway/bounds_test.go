package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
)

// post sends one raw call to the rig's door with the attempt's token and
// returns the status and body.
func (r *llmRig) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Api-Key", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.ReplaceAll(string(b), `\"`, `"`)
}

// TestRequestsParsedStrictly (audit F3, F7, F1): a body two decoders read
// differently (a key twice), an n that multiplies the output past the
// budget, input the body does not hold (a stored Responses conversation),
// provider-side tools and a model name no provider has are refused before
// anything is sent, each recorded without growing the ledger's keys.
func TestRequestsParsedStrictly(t *testing.T) {
	price, _ := mustPrices(t).Lookup("gpt-4o")
	// Room for one call of 1,000 output tokens, not for 128 of them.
	rig := newRig(t, llm.Budget{USD: price.Worst(4096, 1000) * 4}, &llmfake.Fake{Words: 5})
	huge := strings.Repeat("m", 1<<20)
	for _, c := range []struct{ name, path, body, want string }{
		{"model twice", "/v1/chat/completions", `{"model":"gpt-4o-mini","model":"o3","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, `key "model" appears twice`},
		{"max_tokens twice", "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":10,"max_tokens":16384,"messages":[]}`, `key "max_tokens" appears twice`},
		{"nested key twice", "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","role":"system","content":"x"}]}`, `key "role" appears twice in messages[0]`},
		{"n past the budget", "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":1000,"n":128,"messages":[{"role":"user","content":"hi"}]}`, "budget"},
		{"n past the limit", "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":10,"n":1000,"messages":[]}`, "n must be 1 to 128"},
		{"stored conversation", "/v1/responses", `{"model":"gpt-4o","max_output_tokens":10,"previous_response_id":"resp_1","input":"go on"}`, "previous_response_id brings input"},
		{"server tool", "/v1/responses", `{"model":"gpt-4o","max_output_tokens":10,"input":"x","tools":[{"type":"mcp","server_url":"https://evil.example"}]}`, `tool type "mcp" runs at the provider`},
		{"anthropic fetch", "/v1/messages", `{"model":"claude-3-5-sonnet-20241022","max_tokens":10,"messages":[],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`, `tool type "web_fetch_20250910"`},
		{"mcp servers", "/v1/messages", `{"model":"claude-3-5-sonnet-20241022","max_tokens":10,"messages":[],"mcp_servers":[{"url":"https://evil.example"}]}`, "MCP servers"},
		{"huge model", "/v1/chat/completions", `{"model":"` + huge + `","max_tokens":10,"messages":[]}`, "a model name is at most 256 bytes"},
		{"not an object", "/v1/chat/completions", `[1,2]`, "not a JSON object"},
	} {
		status, body := rig.post(t, c.path, c.body)
		if status < 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want a refusal naming %q", c.name, status, body, c.want)
		}
	}
	rig.settled()
	if n := rig.fake.Calls(); n != 0 {
		t.Fatalf("%d refused calls reached the provider", n)
	}
	l := rig.meter.Ledger()
	for k := range l.ByModel {
		if _, ok := mustPrices(t).Lookup(k); k != "" && !ok {
			t.Fatalf("the ledger keeps the unpriced name %.40q", k)
		}
	}
	calls, err := transcript.List(context.Background(), rig.store, "run-gw", 0)
	if err != nil || len(calls) != 11 {
		t.Fatalf("transcript: %d calls, %v", len(calls), err)
	}
	for _, c := range calls {
		if len(c.Model) > llm.MaxModelName+4 {
			t.Fatalf("record %d keeps a %d-byte model name", c.Seq, len(c.Model))
		}
	}
	// A server tool the operator allows goes through.
	rig.gw.LLM.ServerTools = true
	if status, body := rig.post(t, "/v1/responses", `{"model":"gpt-4o","max_output_tokens":10,"input":"x","tools":[{"type":"web_search_preview"}]}`); status != 200 {
		t.Fatalf("allowed server tool: %d %s", status, body)
	}
}

// TestStreamCutBeforeItsUsageIsChargedItsWorstCase (audit F4): an
// Anthropic stream the agent closes after some text, before
// message_delta, is charged its reservation, not message_start's one
// output token.
func TestStreamCutBeforeItsUsageIsChargedItsWorstCase(t *testing.T) {
	rig := newRig(t, llm.Budget{}, &llmfake.Fake{Words: 400, Delay: 3 * time.Millisecond})
	body := `{"model":"claude-3-5-sonnet-20241022","max_tokens":8000,"stream":true,"messages":[{"role":"user","content":"write"}]}`
	req, _ := http.NewRequest(http.MethodPost, rig.url+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc, deltas := bufio.NewScanner(resp.Body), 0
	for sc.Scan() && deltas < 20 {
		if strings.Contains(sc.Text(), "content_block_delta") {
			deltas++
		}
	}
	_ = resp.Body.Close()
	rig.settled()
	l := rig.meter.Ledger()
	if l.Estimated != 1 || l.Tokens.Output != 8000 {
		t.Fatalf("a stream cut after %d deltas: %+v; want its worst case (8,000 output tokens, estimated)", deltas, l.Usage)
	}
}

// TestBoundsHoldTheWorkersMemory (audit N1, F6): 60 connections each
// declaring a 32 MiB body and sending most of it, then stalling: the
// attempt admits what its bounds hold (64 MiB of bodies, 8 calls), the
// others are refused before their bodies are read, the stalled ones are
// cut at the body timeout, and the heap never grows past the bounds.
// Another attempt's gateway answers meanwhile.
func TestBoundsHoldTheWorkersMemory(t *testing.T) {
	rig := newRig(t, llm.Budget{}, &llmfake.Fake{Words: 5})
	rig.gw.LLM.Bounds = Bounds{BodyTimeout: 3 * time.Second}
	other := newRig(t, llm.Budget{}, &llmfake.Fake{Words: 5})
	addr := strings.TrimPrefix(rig.url, "http://")
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	statuses := make([]int, 60)
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", token, 32<<20)
			_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			for range 31 {
				if _, err := conn.Write(chunk); err != nil {
					break
				}
			}
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err == nil {
				statuses[i] = resp.StatusCode
			}
		}()
	}
	// While they stall, another attempt's calls are answered.
	time.Sleep(time.Second)
	if status, body := other.post(t, "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`); status != 200 {
		t.Fatalf("another attempt's call: %d %s", status, body)
	}
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if grown := int64(during.HeapInuse) - int64(before.HeapInuse); grown > 256<<20 {
		t.Fatalf("the heap grew %d MiB under 60 stalled 32 MiB bodies", grown>>20)
	}
	if count[http.StatusTooManyRequests] < 50 || count[http.StatusRequestTimeout] == 0 {
		t.Fatalf("statuses %v: want most refused at once (429), the admitted cut at the body timeout (408)", count)
	}
	t.Logf("statuses %v; heap grew %d MiB", count, (int64(during.HeapInuse)-int64(before.HeapInuse))>>20)
}

// TestZonedAddressesRefused (audit F5): a bare * host pattern never lets
// a zoned IPv6 literal past the deny lists.
func TestZonedAddressesRefused(t *testing.T) {
	p := &Policy{Allow: []string{"*:443", "*:*"}}
	for _, target := range []string{"[::1%lo]:443", "[fe80::1%eth0]:443", "[fd00:ec2::254%25eth0]:80"} {
		if _, err := p.Resolve(context.Background(), target); err == nil {
			t.Errorf("%s let through", target)
		}
	}
	if ap, err := p.Resolve(context.Background(), "[2001:db8::1]:443"); err != nil || ap.Addr() != netip.MustParseAddr("2001:db8::1") {
		t.Fatalf("a plain global address: %v %v", ap, err)
	}
}
