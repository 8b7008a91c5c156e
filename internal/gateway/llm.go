package gateway

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/mlrb/mlrb/internal/llm"
	"github.com/mlrb/mlrb/internal/transcript"
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

	// calls are the calls in progress: a call's answer reaches the agent
	// before the call is settled and recorded.
	calls sync.WaitGroup
	once  sync.Once
	// inFlight and buffered bound the calls in progress and the request
	// bytes they hold.
	inFlight *semaphore.Weighted
	buffered *semaphore.Weighted
}

// Bounds are what one attempt's calls may take of the worker at once,
// whatever the agent sends: the worker's memory stays bounded by the
// attempts it runs, never by what an agent does through its door.
type Bounds struct {
	// InFlight is the calls in progress at once; a call past it is
	// answered 429 at once, its body unread.
	InFlight int64
	// Buffered is the request bytes the calls in progress hold.
	Buffered int64
	// BodyTimeout bounds the time a request's body takes to arrive.
	BodyTimeout time.Duration
}

// DefaultBounds: 8 calls of up to 32 MiB each, 64 MiB in all, each body
// within a minute.
var DefaultBounds = Bounds{InFlight: 8, Buffered: 64 << 20, BodyTimeout: time.Minute}

func (l *LLM) bounds() Bounds {
	b := l.Bounds
	if b.InFlight <= 0 {
		b.InFlight = DefaultBounds.InFlight
	}
	if b.Buffered <= 0 {
		b.Buffered = DefaultBounds.Buffered
	}
	if b.BodyTimeout <= 0 {
		b.BodyTimeout = DefaultBounds.BodyTimeout
	}
	return b
}

// Wait waits for the calls in progress to be settled and handed to the
// recorder: once the agent is gone, its last call is in the ledger.
func (l *LLM) Wait() { l.calls.Wait() }

// MaxRequest bounds a request body.
const MaxRequest = 32 << 20

// routes are the paths served, after the optional /v1 the base URLs end in.
var routes = map[string]llm.API{
	"/v1/chat/completions": llm.ChatCompletions,
	"/v1/responses":        llm.Responses,
	"/v1/messages":         llm.Messages,
}

// call is one call in progress.
type call struct {
	rec     transcript.Call
	api     llm.API
	body    []byte
	price   llm.Price
	hold    *llm.Hold
	started time.Time
	maxOut  int64
}

// refuse answers a call the gateway will not send, in its API's error
// shape so that the agent's SDK shows the message.
func (l *LLM) refuse(w http.ResponseWriter, c *call, status int, kind, msg string) {
	writeAPIError(w, c.api, status, kind, "mlrb gateway: "+msg)
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

func writeAPIError(w http.ResponseWriter, api llm.API, status int, kind, msg string) {
	var v any
	if api == llm.Messages {
		v = map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}}
	} else {
		v = map[string]any{"error": map[string]any{"message": msg, "type": kind, "code": kind, "param": nil}}
	}
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (l *LLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.calls.Add(1)
	defer l.calls.Done()
	b := l.bounds()
	l.once.Do(func() { l.inFlight, l.buffered = semaphore.NewWeighted(b.InFlight), semaphore.NewWeighted(b.Buffered) })
	c := &call{started: time.Now(), rec: transcript.Call{Kind: transcript.KindLLM, Start: time.Now().UTC()}}
	api, ok := routes[r.URL.Path]
	c.api, c.rec.API = api, api
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
		return
	}
	l.forward(w, r, c)
}

// readBody reads a call's body within the attempt's bounds: a call past
// the calls in flight, or whose body the bytes left cannot hold, is
// refused before its body is read, and a body must arrive within the
// body timeout. release gives the call's share back.
func (l *LLM) readBody(w http.ResponseWriter, r *http.Request, c *call, b Bounds) (body []byte, release func(), ok bool) {
	release = func() {}
	if r.ContentLength > MaxRequest {
		l.refuse(w, c, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("a request body may hold at most %d MiB", MaxRequest>>20))
		return nil, release, false
	}
	if !l.inFlight.TryAcquire(1) {
		l.refuse(w, c, http.StatusTooManyRequests, "rate_limit_error", fmt.Sprintf("%d calls of this attempt are in flight already: wait for one to end", b.InFlight))
		return nil, release, false
	}
	share := r.ContentLength
	if share < 0 {
		share = MaxRequest // chunked: the most it may be
	}
	if !l.buffered.TryAcquire(share) {
		l.inFlight.Release(1)
		l.refuse(w, c, http.StatusTooManyRequests, "rate_limit_error", fmt.Sprintf("the calls of this attempt in flight hold %d MiB of requests already: wait for one to end", b.Buffered>>20))
		return nil, release, false
	}
	release = func() {
		l.buffered.Release(share)
		l.inFlight.Release(1)
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(b.BodyTimeout))
	body, err := io.ReadAll(io.LimitReader(r.Body, min(share, MaxRequest)+1))
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		l.refuse(w, c, http.StatusRequestTimeout, "invalid_request_error", fmt.Sprintf("the request body did not arrive whole within %s: %v", b.BodyTimeout, err))
		return nil, release, false
	case int64(len(body)) > min(share, MaxRequest):
		l.refuse(w, c, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("a request body may hold at most %d MiB, and no more than its Content-Length", MaxRequest>>20))
		return nil, release, false
	}
	return body, release, true
}

func (l *LLM) authorised(r *http.Request) bool {
	key := r.Header.Get("X-Api-Key")
	if a := r.Header.Get("Authorization"); key == "" && strings.HasPrefix(a, "Bearer ") {
		key = strings.TrimPrefix(a, "Bearer ")
	}
	return l.Token != "" && subtle.ConstantTimeCompare([]byte(key), []byte(l.Token)) == 1
}

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

func (l *LLM) upstream(api llm.API) Upstream {
	if api == llm.Messages {
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
	up := l.upstream(c.api)
	target := strings.TrimSuffix(up.URL, "/") + r.URL.Path
	if c.api != llm.Messages {
		target = strings.TrimSuffix(up.URL, "/") + strings.TrimPrefix(r.URL.Path, "/v1")
	}
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
	if c.api == llm.Messages {
		req.Header.Set("X-Api-Key", up.Key)
	} else {
		req.Header.Set("Authorization", "Bearer "+up.Key)
	}
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
	writeAPIError(w, c.api, status, "api_error", "mlrb gateway: "+msg)
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
	st := &llm.Stream{API: c.api}
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
		seen = llm.FromBody(c.api, kept.Bytes())
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
		l.Log.Debug("llm call", zap.String("api", string(c.api)), zap.String("model", model), zap.Int("status", c.rec.Status),
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
