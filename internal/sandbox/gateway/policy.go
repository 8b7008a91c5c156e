// Policy decides where an agent may connect.

package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"
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
