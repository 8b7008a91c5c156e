// The LLM relay: a provider called with the worker's key under the attempt's token.

package gateway

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
)

// Upstream is a provider, called with the worker's key.
type Upstream struct {
	// URL is the base the SDKs' base-URL variables take: OpenAI's with
	// its /v1 (https://api.openai.com/v1), Anthropic's without
	// (https://api.anthropic.com).
	URL string
	Key string
	// KeyName says where the key comes from, for the error a worker
	// without one gives.
	KeyName string
}

// LLM serves one attempt's LLM APIs: OpenAI's chat completions and
// Responses, Anthropic's messages. A call must carry the attempt's token;
// its model must be priced; its worst case is reserved against the run's
// budget before it is sent; the provider's answer, streamed or not, goes
// back as it comes, byte for byte, while its usage is read off it; the
// call is recorded in the transcript when it ends.
type LLM struct {
	Token     string
	OpenAI    Upstream
	Anthropic Upstream
	Prices    *llm.Prices
	Meter     *llm.Meter
	// Record keeps the transcript (nil: none).
	Record *transcript.Recorder
	// Live tells whether the attempt still holds its lease (nil: yes).
	Live func() error
	// Transport calls the providers; a call is never retried here (the
	// agent's SDK decides), so a request is never sent twice.
	Transport http.RoundTripper
	Log       *zap.Logger
	// Bounds is what one attempt's calls may hold of the worker at once
	// (zero fields: DefaultBounds'); ServerTools lets provider-side tools
	// (web search and fetch, MCP servers, code execution) through.
	Bounds      Bounds
	ServerTools bool
	// AnthropicBeta are the anthropic-beta values passed to the provider
	// (gateway.anthropic_beta); a call with any other is refused.
	AnthropicBeta []string
	// Allowance counts the calls refused (the door's, shared).
	Allowance *Allowance

	// calls are the calls in progress: a call's answer reaches the agent
	// before the call is settled and recorded.
	calls sync.WaitGroup
	once  sync.Once
	// inFlight and buffered bound the calls in progress and the request
	// bytes they hold.
	inFlight *semaphore.Weighted
	buffered *semaphore.Weighted
	// bodies are request buffers of refused calls, for the next calls:
	// a flood of refusals costs the worker its buffers, not garbage.
	bodies bodyPool
}

// Wait waits for the calls in progress to be settled and handed to the
// recorder: once the agent is gone, its last call is in the ledger.
func (l *LLM) Wait() { l.calls.Wait() }

// MaxRequest bounds a request body.
const MaxRequest = 32 << 20

// call is one call in progress.
type call struct {
	rec     transcript.Call
	spec    *apiSpec
	body    []byte
	price   llm.Price
	hold    *llm.Hold
	started time.Time
	maxOut  int64
}

// refuse answers a call the gateway will not send, in its API's error
// shape so that the agent's SDK shows the message.
func (l *LLM) refuse(w http.ResponseWriter, c *call, status int, kind, msg string) {
	if status != http.StatusTooManyRequests {
		l.Allowance.refusal(int64(len(c.body)))
	}
	writeAPIError(w, c.spec, status, kind, "mlrb gateway: "+msg)
	c.rec.Status, c.rec.Error = status, msg
	u := llm.Usage{Refused: 1}
	// Under a priced model's name, or none: the ledger's keys are the
	// price table's, never what an agent chose to send.
	key := ""
	if _, ok := l.Prices.Lookup(c.rec.Model); ok {
		key = c.rec.Model
	}
	l.Meter.Record(key, u)
	c.rec.Usage = u
	l.finish(c, nil)
}

func (l *LLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.calls.Add(1)
	defer l.calls.Done()
	b := l.bounds()
	l.once.Do(func() { l.inFlight, l.buffered = semaphore.NewWeighted(b.InFlight), semaphore.NewWeighted(b.Buffered) })
	c := &call{started: time.Now(), rec: transcript.Call{Kind: transcript.KindLLM, Start: time.Now().UTC()}}
	spec, ok := specAt(r.URL.Path)
	if ok {
		c.spec, c.rec.API = spec, spec.api
	}
	if !ok || r.Method != http.MethodPost {
		l.refuse(w, c, http.StatusNotFound, "not_found_error", fmt.Sprintf("%s %s is not served: POST /v1/chat/completions, /v1/responses (OpenAI) or /v1/messages (Anthropic); anything else goes out as HTTPS through the proxy to the allow-list", r.Method, r.URL.Path))
		return
	}
	if !l.authorised(r) {
		l.refuse(w, c, http.StatusUnauthorized, "authentication_error", "this is not the attempt's key: use the one in OPENAI / OPENAI_API_KEY / ANTHROPIC / ANTHROPIC_API_KEY (provider keys stay on the worker)")
		return
	}
	if l.Live != nil {
		if err := l.Live(); err != nil {
			l.refuse(w, c, http.StatusUnauthorized, "authentication_error", "the attempt no longer holds its lease: "+err.Error())
			return
		}
	}
	body, release, ok := l.readBody(w, r, c, b)
	defer release()
	if !ok {
		return
	}
	c.body = body
	if !l.admit(w, r, c) {
		// Refused: the recorder has copied what it keeps of the body.
		l.bodies.put(body, b.Buffered)
		return
	}
	l.forward(w, r, c)
}

func (l *LLM) authorised(r *http.Request) bool {
	key := r.Header.Get("X-Api-Key")
	if a := r.Header.Get("Authorization"); key == "" && strings.HasPrefix(a, "Bearer ") {
		key = strings.TrimPrefix(a, "Bearer ")
	}
	return l.Token != "" && subtle.ConstantTimeCompare([]byte(key), []byte(l.Token)) == 1
}

func (l *LLM) upstream(spec *apiSpec) Upstream {
	if spec.anthropic {
		return l.Anthropic
	}
	return l.OpenAI
}

// hopHeaders are never passed on, either way.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// ourHeaders are the agent's credentials and what would tie a call to
// our account: replaced or dropped on the way up.
var ourHeaders = []string{"Authorization", "X-Api-Key", "Cookie", "Openai-Organization", "Openai-Project", "Accept-Encoding", "Content-Length", "Host"}

func (l *LLM) forward(w http.ResponseWriter, r *http.Request, c *call) {
	up := l.upstream(c.spec)
	target := c.spec.target(up.URL, r.URL.Path)
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, target, bytes.NewReader(c.body))
	if err != nil {
		l.failed(w, c, http.StatusBadGateway, "upstream "+target+": "+err.Error())
		return
	}
	req.Header = r.Header.Clone()
	for _, h := range append(hopHeaders, ourHeaders...) {
		req.Header.Del(h)
	}
	c.spec.auth(req.Header, up.Key)
	t := l.Transport
	if t == nil {
		t = http.DefaultTransport
	}
	resp, err := t.RoundTrip(req)
	if err != nil {
		l.failed(w, c, http.StatusBadGateway, fmt.Sprintf("the provider could not be reached: %v", err))
		return
	}
	defer func() { _ = resp.Body.Close() }()
	l.relay(w, resp, c)
}

// failed ends a call the provider never answered.
func (l *LLM) failed(w http.ResponseWriter, c *call, status int, msg string) {
	writeAPIError(w, c.spec, status, "api_error", "mlrb gateway: "+msg)
	c.rec.Status, c.rec.Error = status, msg
	c.rec.Usage = llm.Usage{Calls: 1, Failed: 1}
	c.hold.Settle(c.rec.Model, c.rec.Usage)
	l.finish(c, nil)
}

// relay passes the provider's answer on as it comes, flushing each read
// so that a stream's events reach the agent when they reach us, and
// reads its usage on the way.
func (l *LLM) relay(w http.ResponseWriter, resp *http.Response, c *call) {
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	st := &llm.Stream{API: c.spec.api}
	var kept bytes.Buffer
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if c.rec.FirstByteMS == 0 {
				c.rec.FirstByteMS = ms(time.Since(c.started))
			}
			if kept.Len() < transcript.MaxBody {
				kept.Write(buf[:min(n, transcript.MaxBody-kept.Len())])
			}
			if c.rec.Stream {
				_, _ = st.Write(buf[:n])
			}
			if _, err := w.Write(buf[:n]); err != nil {
				c.rec.Error = "the agent went away mid-answer"
				break
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				c.rec.Error = "the provider's answer broke off: " + rerr.Error()
			}
			break
		}
	}
	seen := st.Seen
	if !c.rec.Stream {
		seen = llm.FromBody(c.spec.api, kept.Bytes())
	}
	c.rec.Status = resp.StatusCode
	c.rec.Served, c.rec.Raw = llm.Shorten(seen.Model, llm.MaxModelName), seen.Raw
	c.rec.Usage = l.usage(resp, c, seen)
	c.hold.Settle(c.rec.Model, c.rec.Usage)
	l.finish(c, kept.Bytes())
}

// copyBufs are the buffers answers are relayed through, one per call in
// flight, reused.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// usage is what the call cost: as the provider reported it, priced by the
// table; the reservation when a successful call's whole usage never came
// (a stream cut before its terminal usage event: the provider may bill
// for it all).
func (l *LLM) usage(resp *http.Response, c *call, seen llm.Seen) llm.Usage {
	u := llm.Usage{Calls: 1}
	ok := resp.StatusCode/100 == 2
	switch {
	case seen.Known && seen.Final:
		// Priced as the dearer of the model asked for and the model that
		// answered.
		price := c.price
		if served, found := l.Prices.Lookup(seen.Model); found && served.Cost(seen.Tokens) > price.Cost(seen.Tokens) {
			price = served
		}
		u.Tokens, u.USD = seen.Tokens, price.Cost(seen.Tokens)
	case ok:
		u.Estimated = 1
		u.Tokens, u.USD = llm.Tokens{Input: int64(len(c.body)), Output: c.maxOut}, c.hold.USD
	}
	if !ok {
		u.Failed = 1
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		u.RateLimited = 1
		u.RateLimitWaitS = retryAfter(resp.Header, time.Now())
		c.rec.RetryAfterS = u.RateLimitWaitS
	}
	return u
}

// retryAfter reads the wait a provider asks for: retry-after-ms, or
// retry-after in seconds or as a date.
func retryAfter(h http.Header, now time.Time) float64 {
	if v, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && v >= 0 {
		return v / 1000
	}
	v := h.Get("Retry-After")
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return s
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Seconds()
	}
	return 0
}

func (l *LLM) finish(c *call, resp []byte) {
	c.rec.LatencyMS = ms(time.Since(c.started))
	if l.Log != nil {
		model, why := c.rec.Model, c.rec.Error
		if l.Record != nil {
			model, why = l.Record.Scrub(model), l.Record.Scrub(why)
		}
		l.Log.Debug("llm call", zap.String("api", string(c.rec.API)), zap.String("model", model), zap.Int("status", c.rec.Status),
			zap.Float64("usd", c.rec.Usage.USD), zap.String("error", why))
	}
	if l.Record != nil {
		l.Record.Add(c.rec, c.body, resp)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// keptHeaders are the request headers a record keeps: what says which
// client and API version asked, never a credential.
func keptHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"User-Agent", "Anthropic-Version", "Anthropic-Beta", "Openai-Beta", "Content-Type"} {
		if v := h.Get(k); v != "" {
			out[strings.ToLower(k)] = v
		}
	}
	return out
}

// AgentEnv is what an agent is told of its gateway at base (its door):
// the attempt's token under the names MLRB's agent reads (OPENAI,
// ANTHROPIC) and the official SDKs read (OPENAI_API_KEY,
// ANTHROPIC_API_KEY), and the base URLs the SDKs take. The door itself is
// not proxied (NO_PROXY), whatever HTTP(S)_PROXY says.
func AgentEnv(base, token string) map[string]string {
	return map[string]string{
		"OPENAI": token, "OPENAI_API_KEY": token, "ANTHROPIC": token, "ANTHROPIC_API_KEY": token,
		"OPENAI_BASE_URL": base + "/v1", "ANTHROPIC_BASE_URL": base,
		"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
	}
}
