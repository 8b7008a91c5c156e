package e2e

import (
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// proxy forwards a port to a server and can cut the link, as a network
// partition does to one host: every connection through it is reset and
// new ones are refused until it heals. Both sides are real processes.
type proxy struct {
	port   int
	target string
	ln     net.Listener
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{port: freePort(t), target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.port))
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	t.Cleanup(func() { _ = ln.Close(); p.partition() })
	go p.serve()
	return p
}

func (p *proxy) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// partition resets every connection and refuses new ones.
func (p *proxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// heal lets connections through again.
func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}
