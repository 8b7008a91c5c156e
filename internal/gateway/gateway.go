// Package gateway is an agent's one door out: each attempt's container has
// no network but a loopback shared with a relay (mlrb-agent door), which
// carries every connection to a unix socket this package serves on the
// worker. Here an HTTP proxy lets CONNECT through to the operator's
// allow-list only, and never to anything of ours: loopback, link-local
// (the instance metadata service), this host's own addresses, the
// Temporal frontend, the blob store, the metrics listener. Each
// connection is logged and recorded in the run's transcript. The LLM
// APIs (llm.go) are served on the same door.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/mlrb/mlrb/internal/llm"
	"github.com/mlrb/mlrb/internal/transcript"
)

// Policy decides where an agent may connect.
type Policy struct {
	// Allow are host:port patterns: a name ("pypi.org:443"), a wildcard
	// under a domain ("*.hf.co:443", which is not hf.co itself), a literal
	// IP or a CIDR ("10.0.0.5:8080", "10.0.0.0/24:443"); port "*" is any.
	Allow []string
	// Deny are addresses of ours, refused whatever Allow says.
	Deny []netip.Prefix
}

// Always refused: loopback, link-local (169.254.169.254, the instance
// metadata service, and fd00:ec2::254, its IPv6 address), unspecified,
// multicast.
var alwaysDenied = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10"), netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("224.0.0.0/4"), netip.MustParsePrefix("ff00::/8"), netip.MustParsePrefix("255.255.255.255/32"),
}

// Private ranges are refused unless an Allow entry names the address
// itself (a literal IP or CIDR): a name that resolves into a private
// network is the classic way in to what sits beside the host.
var private = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("fc00::/7"),
}

// Ours gathers the addresses of the machinery that runs agents: every
// address of this host's interfaces, and what each endpoint (host:port or
// a URL: temporal.address, the store, the metrics listener, the metadata
// service) resolves to. A name that does not resolve is skipped.
func Ours(ctx context.Context, endpoints ...string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("this host's addresses: %w", err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, netip.PrefixFrom(p.Addr().Unmap(), p.Addr().BitLen()))
		}
	}
	for _, e := range endpoints {
		host := endpointHost(e)
		if host == "" {
			continue
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			out = append(out, netip.PrefixFrom(ip.Unmap(), ip.BitLen()))
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ips, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
		cancel()
		if err != nil {
			continue
		}
		for _, ip := range ips {
			out = append(out, netip.PrefixFrom(ip.Unmap(), ip.BitLen()))
		}
	}
	return out, nil
}

// endpointHost is the host of host:port, :port or a URL ("" for none).
func endpointHost(e string) string {
	if e == "" {
		return ""
	}
	if i := strings.Index(e, "://"); i >= 0 {
		e = e[i+3:]
		if j := strings.IndexAny(e, "/?#"); j >= 0 {
			e = e[:j]
		}
	}
	if h, _, err := net.SplitHostPort(e); err == nil {
		return strings.Trim(h, "[]")
	}
	return strings.Trim(e, "[]")
}

// CheckPattern tells whether an allow-list entry is well formed.
func CheckPattern(p string) error {
	host, port, err := net.SplitHostPort(p)
	if err != nil || host == "" {
		return fmt.Errorf("%q is not host:port (e.g. pypi.org:443, *.hf.co:443, 10.0.0.0/24:443)", p)
	}
	if port != "*" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %q is not 1-65535 or *", p, port)
		}
	}
	if strings.Contains(host, "/") {
		if _, err := netip.ParsePrefix(host); err != nil {
			return fmt.Errorf("%q: %s is not a CIDR", p, host)
		}
	}
	return nil
}

// allowed tells whether host:port matches an entry, and whether the entry
// named the address itself (a literal IP or CIDR).
func (p *Policy) allowed(host string, port int, ip netip.Addr) (ok, literal bool) {
	for _, pat := range p.Allow {
		ph, pp, err := net.SplitHostPort(pat)
		if err != nil || (pp != "*" && pp != strconv.Itoa(port)) {
			continue
		}
		if pfx, err := netip.ParsePrefix(ph); err == nil {
			if pfx.Contains(ip) {
				return true, true
			}
			continue
		}
		if a, err := netip.ParseAddr(ph); err == nil {
			if a.Unmap() == ip {
				return true, true
			}
			continue
		}
		if m, _ := path.Match(strings.ToLower(ph), strings.ToLower(host)); m {
			return true, false
		}
	}
	return false, false
}

// ErrRefused is a destination the policy refuses.
var ErrRefused = errors.New("refused")

// Resolve checks a CONNECT target against the policy and returns the
// address to dial: one the name resolves to that is allowed and none of
// ours. A name is resolved here, once, and dialled by address, so an
// answer that changes between the check and the dial changes nothing.
func (p *Policy) Resolve(ctx context.Context, target string) (netip.AddrPort, error) {
	host, ps, err := net.SplitHostPort(target)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: %q is not host:port", ErrRefused, target)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("%w: %q has no port", ErrRefused, target)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		// A zoned address (fe80::1%eth0, ::1%lo) is in no prefix at all:
		// every deny list would pass it.
		if ip.Zone() != "" {
			return netip.AddrPort{}, fmt.Errorf("%w: %s names an interface zone; addresses are matched without one", ErrRefused, target)
		}
		ips = []netip.Addr{ip.Unmap()}
	} else {
		// A name not on the list is refused before it is resolved: the
		// agent learns nothing through our resolver.
		if ok, _ := p.allowed(host, port, netip.Addr{}); !ok {
			return netip.AddrPort{}, fmt.Errorf("%w: %s is not on the egress allow-list (gateway.allow)", ErrRefused, target)
		}
		found, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("%w: %s does not resolve: %v", ErrRefused, host, err)
		}
		for _, ip := range found {
			ips = append(ips, ip.Unmap())
		}
	}
	why := fmt.Sprintf("%s is not on the egress allow-list (gateway.allow)", target)
	for _, ip := range ips {
		ok, literal := p.allowed(host, port, ip)
		switch {
		case !ok:
		case inAny(ip, alwaysDenied) || inAny(ip, p.Deny):
			why = fmt.Sprintf("%s (%s) is an address of this deployment or this host's (loopback, link-local, the metadata service, an interface, the control plane), never an agent's", target, ip)
		case inAny(ip, private) && !literal:
			why = fmt.Sprintf("%s resolves to the private address %s; allow it by address if it is meant", target, ip)
		default:
			return netip.AddrPortFrom(ip, uint16(port)), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("%w: %s", ErrRefused, why)
}

func inAny(ip netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Gateway serves one attempt's door.
type Gateway struct {
	Policy *Policy
	Log    *zap.Logger
	// Dial connects to an address the policy let through.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// LLM serves the LLM APIs (nil: CONNECT only).
	LLM *LLM
	// Record keeps each connection in the transcript (nil: none).
	Record *transcript.Recorder

	srv  *http.Server
	mu   sync.Mutex
	open map[net.Conn]struct{}
	// tunnels bounds the connections open at once (MaxTunnels).
	tunnels *semaphore.Weighted
}

// Serve answers on l until Close.
func (g *Gateway) Serve(l net.Listener) error {
	g.mu.Lock()
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 1 << 20}
	g.open = map[net.Conn]struct{}{}
	srv := g.srv
	g.mu.Unlock()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the gateway and every connection it carries: an attempt's
// door never outlives it.
func (g *Gateway) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.open {
		_ = c.Close()
	}
	if g.srv == nil {
		return nil
	}
	return g.srv.Close()
}

func (g *Gateway) track(c net.Conn, on bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil {
		return false
	}
	if on {
		g.open[c] = struct{}{}
	} else {
		delete(g.open, c)
	}
	return true
}

// ServeHTTP serves the LLM APIs and lets CONNECT through to what the
// policy allows; anything else (plain HTTP proxying) is refused.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		// A proxy-style request for another host is not ours to carry.
		if g.LLM != nil && (r.URL.Host == "" || r.URL.Host == r.Host) {
			g.LLM.ServeHTTP(w, r)
			return
		}
		g.record(transcript.Call{Host: llm.Shorten(r.Host, maxHost), Error: "plain HTTP is not carried: only HTTPS (CONNECT) to the allow-list (gateway.allow)"}, time.Now())
		http.Error(w, "mlrb gateway: only the LLM APIs, and CONNECT host:port to the allow-list (gateway.allow)", http.StatusForbidden)
		return
	}
	start := time.Now()
	host := llm.Shorten(r.Host, maxHost)
	g.mu.Lock()
	if g.tunnels == nil {
		g.tunnels = semaphore.NewWeighted(MaxTunnels)
	}
	tunnels := g.tunnels
	g.mu.Unlock()
	if !tunnels.TryAcquire(1) {
		g.record(transcript.Call{Host: host, Status: http.StatusTooManyRequests, Error: fmt.Sprintf("%d connections of this attempt are open already", MaxTunnels)}, start)
		http.Error(w, fmt.Sprintf("mlrb gateway: %d connections of this attempt are open already", MaxTunnels), http.StatusTooManyRequests)
		return
	}
	defer tunnels.Release(1)
	to, err := g.Policy.Resolve(r.Context(), r.Host)
	if err != nil {
		g.Log.Info("agent connection refused", zap.String("to", g.scrub(host)), zap.Error(errors.New(g.scrub(err.Error()))))
		g.record(transcript.Call{Host: host, Status: http.StatusForbidden, Error: err.Error()}, start)
		http.Error(w, "mlrb gateway: "+err.Error(), http.StatusForbidden)
		return
	}
	dial := g.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 15 * time.Second}).DialContext
	}
	up, err := dial(r.Context(), "tcp", to.String())
	if err != nil {
		g.Log.Info("agent connection failed", zap.String("to", g.scrub(host)), zap.Stringer("addr", to), zap.Error(err))
		g.record(transcript.Call{Host: host, Status: http.StatusBadGateway, Error: err.Error()}, start)
		http.Error(w, "mlrb gateway: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "mlrb gateway: no hijacking", http.StatusInternalServerError)
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if !g.track(up, true) || !g.track(down, true) {
		_ = up.Close()
		_ = down.Close()
		return
	}
	g.Log.Info("agent connection", zap.String("to", g.scrub(host)), zap.Stringer("addr", to))
	_, _ = io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n")
	// What the client sent after its CONNECT line is in rw's buffer.
	out, in := splice(up, rw, down, up)
	_ = up.Close()
	_ = down.Close()
	g.track(up, false)
	g.track(down, false)
	g.Log.Info("agent connection closed", zap.String("to", g.scrub(host)), zap.Int64("sent", out), zap.Int64("received", in), zap.Duration("for", time.Since(start)))
	g.record(transcript.Call{Host: host, Status: http.StatusOK, Sent: out, Received: in}, start)
}

// maxHost bounds a CONNECT target as it is kept (an agent chooses it).
const maxHost = 300

// MaxTunnels bounds an attempt's open connections through its door.
const MaxTunnels = 64

// scrub masks the run's secrets in what the worker logs of a connection.
func (g *Gateway) scrub(s string) string {
	if g.Record == nil {
		return s
	}
	return g.Record.Scrub(s)
}

// record keeps a connection, or a refusal, in the transcript.
func (g *Gateway) record(c transcript.Call, start time.Time) {
	if g.Record == nil {
		return
	}
	c.Kind, c.Start, c.LatencyMS = transcript.KindConnect, start.UTC(), ms(time.Since(start))
	g.Record.Add(c, nil, nil)
}

// splice copies a to b and c to d at once, each side's write end closed
// when its source ends, and returns the bytes of each.
func splice(a net.Conn, b io.Reader, c net.Conn, d io.Reader) (int64, int64) {
	var ab, cd int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		ab, _ = io.Copy(a, b)
		closeWrite(a)
	}()
	go func() {
		defer wg.Done()
		cd, _ = io.Copy(c, d)
		closeWrite(c)
	}()
	wg.Wait()
	return ab, cd
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
