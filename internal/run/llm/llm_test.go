package llm

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestBuiltinPrices(t *testing.T) {
	p, err := BuiltinPrices()
	if err != nil {
		t.Fatal(err)
	}
	gpt, ok := p.Lookup("gpt-4o")
	if !ok {
		t.Fatal("gpt-4o unpriced")
	}
	// 1M uncached in, 1M cached in, 1M out: 2.50 + 1.25 + 10.
	if c := gpt.Cost(Tokens{Input: 1e6, CacheRead: 1e6, Output: 1e6}); c != 13.75 {
		t.Errorf("gpt-4o cost %v, want 13.75", c)
	}
	claude, _ := p.Lookup("claude-3-5-sonnet-20241022")
	if c := claude.Cost(Tokens{Input: 1e6, CacheWrite: 1e6, CacheRead: 1e6, Output: 1e6}); c != 3+3.75+0.30+15 {
		t.Errorf("claude cost %v", c)
	}
	if _, ok := p.Lookup("gpt-4o-mini-2099"); ok {
		t.Error("an unlisted name is priced")
	}
	if p.Ref().SHA256 == "" || p.Ref().Date != "2025-11-24" {
		t.Errorf("ref %+v", p.Ref())
	}
}

func TestPriceTableRefused(t *testing.T) {
	for name, table := range map[string]string{
		"date":      "date: soon\nmodels: []\n",
		"twice":     "date: 2025-01-01\nmodels:\n- names: [a]\n  input: 1\n  output: 1\n- names: [a]\n  input: 1\n  output: 1\n",
		"negative":  "date: 2025-01-01\nmodels:\n- names: [a]\n  input: -1\n  output: 1\n",
		"no names":  "date: 2025-01-01\nmodels:\n- input: 1\n  output: 1\n",
		"unknown":   "date: 2025-01-01\nmodels:\n- names: [a]\n  inptu: 1\n",
		"not yaml":  "{",
		"max < 0":   "date: 2025-01-01\nmodels:\n- names: [a]\n  input: 1\n  output: 1\n  max_output_tokens: -5\n",
		"nan price": "date: 2025-01-01\nmodels:\n- names: [a]\n  input: .nan\n  output: 1\n",
	} {
		if _, err := ParsePrices([]byte(table), "t"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestUsageNormalised(t *testing.T) {
	chat := FromBody(ChatCompletions, []byte(`{"model":"gpt-4o-2024-08-06","usage":{"prompt_tokens":1000,"completion_tokens":300,"total_tokens":1300,"prompt_tokens_details":{"cached_tokens":400},"completion_tokens_details":{"reasoning_tokens":100}}}`))
	if want := (Tokens{Input: 600, CacheRead: 400, Output: 300, Reasoning: 100}); !chat.Known || chat.Tokens != want || chat.Model != "gpt-4o-2024-08-06" {
		t.Errorf("chat: %+v", chat)
	}
	resp := FromBody(Responses, []byte(`{"model":"o3","usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":10},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":5}}}`))
	if want := (Tokens{Input: 40, CacheRead: 10, Output: 20, Reasoning: 5}); resp.Tokens != want {
		t.Errorf("responses: %+v", resp)
	}
	msg := FromBody(Messages, []byte(`{"model":"claude","usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":200,"output_tokens":7}}`))
	if want := (Tokens{Input: 12, CacheWrite: 100, CacheRead: 200, Output: 7}); msg.Tokens != want {
		t.Errorf("messages: %+v", msg)
	}
	if FromBody(ChatCompletions, []byte(`{"error":{}}`)).Known {
		t.Error("usage seen in an error")
	}
}

func TestStreamUsage(t *testing.T) {
	anth := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":25,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":15}}\n\n"
	chat := "data: {\"model\":\"gpt-4o\",\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n" +
		"data: {\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n"
	resp := "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"o3\",\"usage\":{\"input_tokens\":4,\"output_tokens\":2}}}\n\n"
	for _, c := range []struct {
		api  API
		s    string
		want Tokens
	}{{Messages, anth, Tokens{Input: 25, CacheRead: 5, Output: 15}}, {ChatCompletions, chat, Tokens{Input: 9, Output: 3}}, {Responses, resp, Tokens{Input: 4, Output: 2}}} {
		// Byte by byte: an event split anywhere is still read.
		st := &Stream{API: c.api}
		for i := range len(c.s) {
			_, _ = st.Write([]byte{c.s[i]})
		}
		if !st.Seen.Known || st.Seen.Tokens != c.want {
			t.Errorf("%s: %+v, want %+v", c.api, st.Seen, c.want)
		}
	}
	cut := &Stream{API: ChatCompletions}
	_, _ = cut.Write([]byte("data: {\"choices\":[{\"delta\":{}}]}\n\n"))
	if cut.Seen.Known {
		t.Error("a stream cut before its usage reads as known")
	}
}

// TestBudgetHoldsUnderConcurrency: 50 calls at once, each reserving a
// worst case of $1 against a $10 budget: no more than 10 are ever held,
// and what they spend never passes the budget.
func TestBudgetHoldsUnderConcurrency(t *testing.T) {
	m := NewMeter(Budget{USD: 10}, Usage{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted, refused := 0, 0
	gate := make(chan struct{})
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			h, err := m.Reserve(1, 0, 0.1, 0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if !errors.Is(err, ErrOverBudget) || !strings.Contains(err.Error(), "left") {
					t.Errorf("refusal: %v", err)
				}
				refused++
				return
			}
			admitted++
			_ = h // held to the end: none settles, so none frees room
		}()
	}
	close(gate)
	wg.Wait()
	if admitted != 10 || refused != 40 {
		t.Fatalf("admitted %d, refused %d; want 10 and 40", admitted, refused)
	}
}

func TestSettleFreesAndSpends(t *testing.T) {
	m := NewMeter(Budget{USD: 1}, Usage{USD: 0.5})
	h, err := m.Reserve(0.4, 0, 0.01, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reserve(0.2, 0, 0.01, 0); err == nil {
		t.Fatal("a call past the budget with another's reservation held was admitted")
	}
	if m.Spent() {
		t.Fatal("spent while a call is in flight and the refused one could be paid without output")
	}
	h.Settle("gpt-4o", Usage{Calls: 1, USD: 0.1})
	if _, err := m.Reserve(0.2, 0, 0.01, 0); err != nil {
		t.Fatalf("a settled call gave its reservation back: %v", err)
	}
	if l := m.Ledger(); l.USD != 0.1 || l.ByModel["gpt-4o"].Calls != 1 {
		t.Errorf("ledger %+v", l)
	}
	m2 := NewMeter(Budget{USD: 1}, Usage{USD: 0.995})
	if !m2.Spent() {
		t.Error("a budget with 0.5 % left is not spent")
	}
	m3 := NewMeter(Budget{Tokens: 1000}, Usage{})
	if _, err := m3.Reserve(0, 2000, 0, 1500); err == nil || !m3.Spent() {
		t.Errorf("a call whose input alone is past the budget: %v, spent %v", err, m3.Spent())
	}
}

func TestRecost(t *testing.T) {
	var l Ledger
	l.Record("gpt-4o", Usage{Calls: 1, Tokens: Tokens{Input: 1e6}, USD: 2.5})
	l.Record("", Usage{Refused: 1})
	p, _ := BuiltinPrices()
	if usd, err := l.Recost(p); err != nil || usd != 2.5 {
		t.Errorf("recost %v %v", usd, err)
	}
	other, _ := ParsePrices([]byte("date: 2026-01-01\nmodels:\n- names: [gpt-4o]\n  input: 1\n  output: 1\n"), "t")
	if usd, _ := l.Recost(other); usd != 1 {
		t.Errorf("recost under another table: %v", usd)
	}
	none, _ := ParsePrices([]byte("date: 2026-01-01\nmodels: []\n"), "t")
	if _, err := l.Recost(none); err == nil || !strings.Contains(err.Error(), `"gpt-4o"`) {
		t.Errorf("recost without its model's price: %v", err)
	}
	var sum Ledger
	sum.Merge(l)
	sum.Merge(l)
	if sum.Calls != 2 || sum.Refused != 2 || sum.ByModel["gpt-4o"].USD != 5 {
		t.Errorf("merged %+v", sum)
	}
}
