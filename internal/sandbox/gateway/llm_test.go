package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
)

const (
	realOpenAI    = "sk-real-openai-KEY"
	realAnthropic = "sk-ant-real-KEY"
	token         = "mlrb-attempt-token-1"
)

type llmRig struct {
	gw     *Gateway
	fake   *llmfake.Fake
	meter  *llm.Meter
	store  blob.Store
	rec    *transcript.Recorder
	url    string
	hashes *seenBodies
}

// newRig serves an attempt's gateway in front of a fake provider, and
// points the official SDKs at it through their environment variables, as
// an agent's container is.
func newRig(t *testing.T, budget llm.Budget, fake *llmfake.Fake) *llmRig {
	t.Helper()
	return newRigOut(t, budget, fake, rigOut{pol: &Policy{}})
}

// rigOut is what newRigOut adds to newRig: a CONNECT policy, a dialler
// standing in for the network, and what the recorder calls on each call
// as it is added (seen).
type rigOut struct {
	pol  *Policy
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	seen func(transcript.Call)
	// allow is the door's allowance (nil: the defaults).
	allow *Allowance
}

func newRigOut(t *testing.T, budget llm.Budget, fake *llmfake.Fake, out rigOut) *llmRig {
	t.Helper()
	fake.OpenAIKey, fake.AnthropicKey = realOpenAI, realAnthropic
	up, err := fake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	prices, err := llm.BuiltinPrices()
	if err != nil {
		t.Fatal(err)
	}
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	meter := llm.NewMeter(budget, llm.Usage{})
	rec := &transcript.Recorder{Store: store, RunID: "run-gw", Attempt: 1, Redact: []string{token, realOpenAI, realAnthropic}, Ledger: meter.Ledger, Seen: out.seen}
	// Before the store's directory goes: records still being written.
	t.Cleanup(rec.Wait)
	g := &Gateway{Policy: out.pol, Dial: out.dial, Log: zap.NewNop(), Record: rec, Allowance: out.allow, LLM: &LLM{Token: token, Prices: prices, Meter: meter, Record: rec, Allowance: out.allow,
		OpenAI: Upstream{URL: up + "/v1", Key: realOpenAI}, Anthropic: Upstream{URL: up, Key: realAnthropic}}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(l) }()
	t.Cleanup(func() { _ = g.Close() })
	base := "http://" + l.Addr().String()
	for k, v := range AgentEnv(base, token) {
		t.Setenv(k, v)
	}
	return &llmRig{gw: g, fake: fake, meter: meter, store: store, rec: rec, url: base, hashes: &seenBodies{}}
}

// settled waits for the calls made so far to be settled and recorded (an
// answer reaches the client before its call is settled).
func (r *llmRig) settled() {
	r.gw.LLM.Wait()
	r.rec.Wait()
}

// seenBodies hashes the bytes each answer brought the client.
type seenBodies struct {
	mu  sync.Mutex
	got [][32]byte
}

type hashingBody struct {
	io.ReadCloser
	h    hash.Hash
	seen *seenBodies
	once sync.Once
}

func (b *hashingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		b.done()
	}
	return n, err
}

// Close reads what the SDK left (a stream's reader may stop at its last
// event), so that the sum is of every byte the answer brought.
func (b *hashingBody) Close() error {
	_, _ = io.Copy(b.h, b.ReadCloser)
	b.done()
	return b.ReadCloser.Close()
}

func (b *hashingBody) done() {
	b.once.Do(func() {
		b.seen.mu.Lock()
		b.seen.got = append(b.seen.got, [32]byte(b.h.Sum(nil)))
		b.seen.mu.Unlock()
	})
}

func (s *seenBodies) middleware(r *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	resp, err := next(r)
	if err == nil {
		resp.Body = &hashingBody{ReadCloser: resp.Body, h: sha256.New(), seen: s}
	}
	return resp, err
}

// TestOfficialSDKsThroughTheGateway: the official OpenAI and Anthropic
// SDKs, configured only by the variables an agent gets, make plain and
// streamed calls through every API; each answer reaches them byte for
// byte as the provider sent it; the provider sees the worker's key, never
// the agent's token; every call is metered, priced and recorded.
func TestOfficialSDKsThroughTheGateway(t *testing.T) {
	rig := newRig(t, llm.Budget{}, &llmfake.Fake{Words: 7, Keep: true})
	ctx := context.Background()
	oc := openai.NewClient(ooption.WithMiddleware(rig.hashes.middleware))
	ac := anthropic.NewClient(aoption.WithMiddleware(rig.hashes.middleware))
	chat := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("propose an experiment")}}
	if r, err := oc.Chat.Completions.New(ctx, chat); err != nil || !strings.HasPrefix(r.Choices[0].Message.Content, "w0 w1") {
		t.Fatalf("chat: %v %+v", err, r)
	}
	var text strings.Builder
	st := oc.Chat.Completions.NewStreaming(ctx, chat)
	for st.Next() {
		if c := st.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if st.Err() != nil || !strings.HasPrefix(text.String(), "w0 w1") {
		t.Fatalf("chat stream: %v %q", st.Err(), text.String())
	}
	rp := responses.ResponseNewParams{Model: "o3", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	if r, err := oc.Responses.New(ctx, rp); err != nil || !strings.HasPrefix(r.OutputText(), "w0") {
		t.Fatalf("responses: %v", err)
	}
	rs := oc.Responses.NewStreaming(ctx, rp)
	for rs.Next() {
	}
	if rs.Err() != nil {
		t.Fatalf("responses stream: %v", rs.Err())
	}
	msg := anthropic.MessageNewParams{Model: "claude-3-5-sonnet-20241022", MaxTokens: 256, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	if r, err := ac.Messages.New(ctx, msg); err != nil || r.Usage.CacheReadInputTokens == 0 {
		t.Fatalf("messages: %v %+v", err, r)
	}
	as := ac.Messages.NewStreaming(ctx, msg)
	var m anthropic.Message
	for as.Next() {
		if err := m.Accumulate(as.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if as.Err() != nil || m.Usage.OutputTokens != 7 {
		t.Fatalf("messages stream: %v %+v", as.Err(), m.Usage)
	}

	sent := rig.fake.Sent()
	rig.hashes.mu.Lock()
	got := rig.hashes.got
	rig.hashes.mu.Unlock()
	if len(sent) != 6 || len(got) != 6 {
		t.Fatalf("%d answers sent, %d received", len(sent), len(got))
	}
	for i := range sent {
		if sent[i] != got[i] {
			t.Errorf("answer %d reached the client changed", i+1)
		}
	}
	for _, r := range rig.fake.Requests() {
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, token) {
					t.Errorf("the provider saw the agent's token in %s", k)
				}
			}
		}
	}
	if req := rig.fake.Requests()[1]; !strings.Contains(string(req.Body), `"include_usage":true`) {
		t.Errorf("the stream's usage was not asked for: %s", req.Body)
	}

	rig.settled()
	l := rig.meter.Ledger()
	if l.Calls != 6 || l.Estimated != 0 || l.USD <= 0 || len(l.ByModel) != 3 {
		t.Fatalf("ledger %+v", l)
	}
	if c := l.ByModel["claude-3-5-sonnet-20241022"]; c.Tokens.CacheWrite != 20 || c.Tokens.Output != 14 {
		t.Errorf("anthropic usage %+v", c)
	}
	calls, err := transcript.List(ctx, rig.store, "run-gw", 1)
	if err != nil || len(calls) != 6 {
		t.Fatalf("%d calls recorded: %v", len(calls), err)
	}
	for _, c := range calls {
		if c.Status != 200 || c.Usage.USD <= 0 || c.Request == nil || c.Response == nil || c.LatencyMS <= 0 {
			t.Errorf("record %+v", c)
		}
	}
	body, err := transcript.ReadBody(ctx, rig.store, "run-gw", calls[4].Response)
	if err != nil || !strings.Contains(string(body), `"cache_read_input_tokens"`) {
		t.Errorf("recorded answer: %v %s", err, body)
	}
}

// TestGatewayRefusals: a wrong key, an unpriced model, an unknown route
// and a plain-HTTP proxy request never reach the provider; a 429 passes
// through with its retry-after, which the ledger counts.
func TestGatewayRefusals(t *testing.T) {
	rig := newRig(t, llm.Budget{}, &llmfake.Fake{Words: 2})
	ctx := context.Background()
	chat := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
	var apiErr *openai.Error
	guess := openai.NewClient(ooption.WithAPIKey("sk-guessed"), ooption.WithMaxRetries(0))
	_, err := guess.Chat.Completions.New(ctx, chat)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("a wrong key: %v", err)
	}
	unpriced := chat
	unpriced.Model = "gpt-9-preview"
	once := openai.NewClient(ooption.WithMaxRetries(0))
	_, err = once.Chat.Completions.New(ctx, unpriced)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(err.Error(), "has no price") {
		t.Errorf("an unpriced model: %v", err)
	}
	resp, err := http.Get(rig.url + "/v1/models")
	if err != nil || resp.StatusCode != 404 {
		t.Errorf("an unknown route: %v %v", err, resp)
	}
	if rig.fake.Calls() != 0 {
		t.Fatalf("%d refused calls reached the provider", rig.fake.Calls())
	}
	rig.fake.RateLimit(1)
	_, err = once.Chat.Completions.New(ctx, chat)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Response.Header.Get("Retry-After") != "1" {
		t.Fatalf("a 429: %v", err)
	}
	if _, err := once.Chat.Completions.New(ctx, chat); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
	rig.settled()
	l := rig.meter.Ledger()
	if l.Refused != 3 || l.RateLimited != 1 || l.RateLimitWaitS != llmfake.RetryAfter || l.Failed != 1 || l.Calls != 2 {
		t.Errorf("ledger %+v", l.Usage)
	}
}

// TestBudgetUnderFiftyConcurrentCalls: 50 calls at once through the SDK
// against a budget that admits the worst case of 10: never more than 10
// are at the provider at once, and the run never spends past its budget.
func TestBudgetUnderFiftyConcurrentCalls(t *testing.T) {
	probe := openai.ChatCompletionNewParams{Model: "gpt-4o", MaxCompletionTokens: openai.Int(1000),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("one step of the research")}}
	price, _ := mustPrices(t).Lookup("gpt-4o")
	// The worst case of one call: its body's bytes as input, 1000 out.
	body, _ := probe.MarshalJSON()
	worst := price.Worst(int64(len(body)), 1000)
	budget := llm.Budget{USD: 10.5 * worst}
	gate := make(chan struct{})
	rig := newRig(t, budget, &llmfake.Fake{Words: 900, Gate: gate})
	// The budget, not the calls-in-flight bound, is under test.
	rig.gw.LLM.Bounds = Bounds{InFlight: 64}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := openai.NewClient(ooption.WithMaxRetries(0))
			_, err := c.Chat.Completions.New(context.Background(), probe)
			mu.Lock()
			defer mu.Unlock()
			var apiErr *openai.Error
			switch {
			case err == nil:
				ok++
			case errors.As(err, &apiErr) && apiErr.StatusCode == 403 && strings.Contains(err.Error(), "budget"):
				refused++
			default:
				t.Errorf("call: %v", err)
			}
		}()
	}
	// The provider holds its answers until 40 calls were refused: the 10
	// admitted ones are all in flight while the others ask.
	for wait := time.Now(); rig.meter.Ledger().Refused < 40; time.Sleep(time.Millisecond) {
		if time.Since(wait) > time.Minute {
			close(gate)
			t.Fatalf("after a minute, %d calls refused and %d at the provider; want 40 and 10", rig.meter.Ledger().Refused, rig.fake.InFlight())
		}
	}
	close(gate)
	wg.Wait()
	rig.settled()
	l := rig.meter.Ledger()
	if ok != 10 || refused != 40 {
		t.Fatalf("%d answered, %d refused", ok, refused)
	}
	if l.USD > budget.USD {
		t.Fatalf("spent $%.6f of a $%.6f budget", l.USD, budget.USD)
	}
	if max := rig.fake.MaxInFlight(); max > 10 {
		t.Fatalf("%d calls at the provider at once; the budget admits 10", max)
	}
}

func mustPrices(t *testing.T) *llm.Prices {
	p, err := llm.BuiltinPrices()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
