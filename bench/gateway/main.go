// Command gateway measures the run gateway: the latency it adds to an LLM
// call (p50, p99) against calling the provider directly, the calls per
// second it carries, and the streams it holds at once with the memory
// that takes. The provider is internal/testkit/llmfake on loopback; the gateway
// runs in a child process (this binary again) with its meter, price table
// and transcript (to a blob store on disk) as an attempt's is, so that its
// own resident memory can be read.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/sandbox/gateway"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
)

const token, key = "mlrb-bench-token", "sk-bench"

func main() {
	role := flag.String("role", "", "internal: gateway")
	upstream := flag.String("upstream", "", "internal: the provider's URL")
	calls := flag.Int("calls", 2000, "sequential calls timed, direct and through the gateway")
	streams := flag.String("streams", "100,1000", "streams held at once, one measure each")
	secs := flag.Duration("for", 5*time.Second, "how long calls per second are measured")
	flag.Parse()
	if *role == "gateway" {
		serveGateway(*upstream)
		return
	}
	if err := bench(*calls, *streams, *secs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// serveGateway is the child: an attempt's gateway on a loopback port.
func serveGateway(up string) {
	prices, _ := llm.BuiltinPrices()
	dir, _ := os.MkdirTemp("", "gw-bench")
	defer func() { _ = os.RemoveAll(dir) }()
	store, _ := blob.NewFS(dir)
	meter := llm.NewMeter(llm.Budget{}, llm.Usage{})
	rec := &transcript.Recorder{Store: store, RunID: "bench", Attempt: 1, Ledger: meter.Ledger, Redact: []string{token, key}}
	g := &gateway.Gateway{Policy: &gateway.Policy{}, Log: zap.NewNop(), Record: rec, LLM: &gateway.LLM{Token: token, Prices: prices, Meter: meter, Record: rec,
		OpenAI: gateway.Upstream{URL: up + "/v1", Key: key}, Anthropic: gateway.Upstream{URL: up, Key: key},
		Transport: &http.Transport{MaxIdleConnsPerHost: 2048}}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		return
	}
	fmt.Println("ready", l.Addr())
	_ = g.Serve(l)
}

func bench(n int, streamCounts string, secs time.Duration) error {
	fake := &llmfake.Fake{OpenAIKey: key, AnthropicKey: key, Words: 20}
	up, err := fake.Start()
	if err != nil {
		return err
	}
	child := exec.Command(os.Args[0], "-role", "gateway", "-upstream", up)
	out, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	line, _ := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if !ok {
		return fmt.Errorf("gateway: %s", line)
	}
	gw := "http://" + addr
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2048, MaxConnsPerHost: 0}}
	body := []byte(`{"model":"gpt-4o","max_tokens":64,"messages":[{"role":"user","content":"` + strings.Repeat("research ", 200) + `"}]}`)
	stream := []byte(`{"model":"gpt-4o","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"go"}]}`)
	call := func(base, auth string, b []byte) error {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+auth)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	fmt.Printf("latency, %d sequential chat calls each (%d-byte request, %d-word answer):\n", n, len(body), fake.Words)
	direct, err := timeCalls(n, func() error { return call(up, key, body) })
	if err != nil {
		return err
	}
	through, err := timeCalls(n, func() error { return call(gw, token, body) })
	if err != nil {
		return err
	}
	fmt.Printf("  direct   p50 %7.3f ms  p99 %7.3f ms\n", ms(pct(direct, 50)), ms(pct(direct, 99)))
	fmt.Printf("  gateway  p50 %7.3f ms  p99 %7.3f ms\n", ms(pct(through, 50)), ms(pct(through, 99)))
	fmt.Printf("  added    p50 %7.3f ms  p99 %7.3f ms\n", ms(pct(through, 50)-pct(direct, 50)), ms(pct(through, 99)-pct(direct, 99)))

	rate, err := callsPerSecond(secs, 16, func() error { return call(gw, token, body) })
	if err != nil {
		return err
	}
	fmt.Printf("throughput: %.0f calls/s through the gateway (16 clients, %s; each call metered and recorded)\n", rate, secs)

	for _, f := range strings.Split(streamCounts, ",") {
		var k int
		if _, err := fmt.Sscan(f, &k); err != nil || k <= 0 {
			return fmt.Errorf("-streams: %q is not a count", f)
		}
		if err := holdStreams(k, fake, child.Process.Pid, func() error { return call(gw, token, stream) }); err != nil {
			return err
		}
	}
	return nil
}

func timeCalls(n int, f func() error) ([]time.Duration, error) {
	d := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		d = append(d, time.Since(t))
	}
	slices.Sort(d)
	return d, nil
}

func pct(d []time.Duration, p int) time.Duration { return d[(len(d)-1)*p/100] }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func callsPerSecond(d time.Duration, workers int, f func() error) (float64, error) {
	var mu sync.Mutex
	var done int
	var first error
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				err := f()
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return float64(done) / d.Seconds(), first
}

// holdStreams opens k streams at once, each a 2 s answer, and reads the
// gateway's resident memory while they are all open.
func holdStreams(k int, fake *llmfake.Fake, pid int, f func() error) error {
	fake.Words, fake.Delay = 100, 20*time.Millisecond
	defer func() { fake.Words, fake.Delay = 20, 0 }()
	before := rss(pid, "VmRSS")
	var wg sync.WaitGroup
	errs := make(chan error, k)
	start := time.Now()
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f()
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	peakCh := make(chan int64)
	go func() {
		var peak int64
		for ctx.Err() == nil {
			peak = max(peak, rss(pid, "VmRSS"))
			time.Sleep(50 * time.Millisecond)
		}
		peakCh <- peak
	}()
	wg.Wait()
	cancel()
	peak := <-peakCh
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
		}
	}
	fmt.Printf("streams: %d at once (held %d at the provider at most), %d failed, all done in %s; gateway RSS %.1f MiB before, %.1f MiB peak (%.1f KiB per stream)\n",
		k, fake.MaxInFlight(), failed, time.Since(start).Round(time.Millisecond), float64(before)/(1<<20), float64(peak)/(1<<20), float64(peak-before)/1024/float64(k))
	if failed > 0 {
		return fmt.Errorf("%d streams failed", failed)
	}
	return nil
}

// rss reads a memory figure of a process, in bytes.
func rss(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			var kb int64
			_, _ = fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}
