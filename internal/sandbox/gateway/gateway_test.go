package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
)

func TestPolicy(t *testing.T) {
	ctx := context.Background()
	p := &Policy{
		Allow: []string{"pypi.org:443", "*.hf.co:443", "10.1.2.3:8080", "192.0.2.0/24:*", "localhost:7233", "169.254.169.254:80", "203.0.113.7:443"},
		Deny:  []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32")}, // the store, say
	}
	for target, want := range map[string]string{
		"10.1.2.3:8080":      "",           // a private address allowed by address
		"192.0.2.77:9":       "",           // a CIDR, any port
		"10.1.2.3:8081":      "allow-list", // another port
		"example.com:443":    "allow-list",
		"cdn.hf.co:80":       "allow-list",
		"hf.co:443":          "allow-list", // *.hf.co is not hf.co
		"localhost:7233":     "of this deployment",
		"127.0.0.1:7233":     "allow-list",
		"169.254.169.254:80": "of this deployment", // allowed by name, ours regardless
		"203.0.113.7:443":    "of this deployment",
		"[::1]:443":          "allow-list",
		"no-port":            "not host:port",
		"pypi.org:notaport":  "no port",
	} {
		_, err := p.Resolve(ctx, target)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v; want allowed", target, err)
		case want != "" && (err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v; want refused (%s)", target, err, want)
		}
	}
	for _, bad := range []string{"pypi.org", "x:0", "x:70000", "10.0.0.0/33:443", ":443"} {
		if CheckPattern(bad) == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
	ours, err := Ours(ctx, "127.0.0.1:7233", "http://localhost:9000/bucket", "")
	if err != nil || !inAny(netip.MustParseAddr("127.0.0.1"), ours) {
		t.Fatalf("ours = %v, %v", ours, err)
	}
}

// upstream serves each connection with serve (then closes it) on a
// loopback port until the test ends: the far side of a tunnel.
func upstream(t *testing.T, serve func(net.Conn)) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				serve(c)
			}()
		}
	}()
	return l
}

// TestConnectThroughTheSocket: a CONNECT the policy allows is carried both
// ways; one it refuses gets 403 and no connection is made.
func TestConnectThroughTheSocket(t *testing.T) {
	up := upstream(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = io.WriteString(c, "echo "+line)
	})
	// The test server is on loopback, which the policy always refuses:
	// the dialler stands in for the network, the policy for the check.
	pol := &Policy{Allow: []string{"192.0.2.1:443"}}
	g := &Gateway{Policy: pol, Log: zap.NewNop(), Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", up.Addr().String())
	}}
	sock := filepath.Join(t.TempDir(), "door.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(l) }()
	defer func() { _ = g.Close() }()
	connect := func(target string) (int, net.Conn, *bufio.Reader) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, c, br
	}
	code, c, br := connect("192.0.2.1:443")
	if code != 200 {
		t.Fatalf("allowed CONNECT: %d", code)
	}
	_, _ = io.WriteString(c, "hello\n")
	if got, _ := br.ReadString('\n'); got != "echo hello\n" {
		t.Fatalf("through the door: %q", got)
	}
	_ = c.Close()
	if code, c, _ := connect("127.0.0.1:7233"); code != 403 {
		t.Fatalf("CONNECT to loopback: %d", code)
	} else {
		_ = c.Close()
	}
}

// TestCloseWaitsForWhatIsOpen: an attempt's door closes while a tunnel is
// open and an answer is streaming; once Close and the recorder's Wait
// return, both calls are in the transcript (they used to be recorded
// after, lost to a worker that had taken the transcript as whole).
func TestCloseWaitsForWhatIsOpen(t *testing.T) {
	// Held open until the gateway closes it.
	up := upstream(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	rig := newRigOut(t, llm.Budget{}, &llmfake.Fake{Words: 100000, Delay: time.Millisecond}, rigOut{
		pol: &Policy{Allow: []string{"192.0.2.1:443"}},
		dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", up.Addr().String())
		},
		// A handler slow to record its call after its connection closed
		// (a worker short of CPU) is waited for.
		seen: func(transcript.Call) { time.Sleep(300 * time.Millisecond) }})
	c, err := net.Dial("tcp", strings.TrimPrefix(rig.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_, _ = io.WriteString(c, "CONNECT 192.0.2.1:443 HTTP/1.1\r\nHost: 192.0.2.1:443\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	req, _ := http.NewRequest(http.MethodPost, rig.url+"/v1/messages",
		strings.NewReader(`{"model":"claude-3-5-sonnet-20241022","max_tokens":8000,"stream":true,"messages":[{"role":"user","content":"write"}]}`))
	req.Header.Set("X-Api-Key", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatalf("the stream: %v", err)
	}
	if err := rig.gw.Close(); err != nil {
		t.Fatal(err)
	}
	rig.rec.Wait()
	calls, err := transcript.List(context.Background(), rig.store, "run-gw", 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[transcript.Kind]int{}
	for _, c := range calls {
		kinds[c.Kind]++
	}
	if kinds[transcript.KindConnect] != 1 || kinds[transcript.KindLLM] != 1 {
		t.Fatalf("after Close: %v recorded; want the tunnel and the stream", kinds)
	}
	// A closed door takes no more calls.
	if resp, err := http.Post(rig.url+"/v1/messages", "application/json", strings.NewReader("{}")); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("a closed door answered %d", resp.StatusCode)
	}
}
