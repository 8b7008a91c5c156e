package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rss is a process's resident memory, in bytes (0 when gone).
func rss(pid int) int64 {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestGatewayBodyAttack (audit N1, in a real container as it was
// reproduced): an agent opens 60 connections to its door, each a call
// with its token declaring a 32 MiB body, sends 31 MiB of it and holds.
// The worker (which took 6 GB before) stays under 1 GiB resident: past
// the attempt's bounds the calls are refused at once, unread, and the
// admitted ones are cut at the body timeout. The agent is then scored
// as usual.
func TestGatewayBodyAttack(t *testing.T) {
	testtaskImage(t, "mlrb-gwdos:e2e", "gwdos", "60")
	e := containerAgentEnv(t)
	w := e.worker
	var mu sync.Mutex
	var peak int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if r := rss(w.cmd.Process.Pid); r > 0 {
				mu.Lock()
				peak = max(peak, r)
				mu.Unlock()
			}
		}
	}()
	var res result
	e.starterJSON(&res, "run", "--task", "e2e_container", "--label", "e2e-image", "--image", "mlrb-gwdos:e2e", "--provider", "openai",
		"--seed", "1", "--time-limit", "150s", "--wait", "--json")
	close(stop)
	<-done
	logs, _, _ := e.starter("logs", res.RunID)
	if res.Outcome != "scored" || !strings.Contains(logs, "HTTP/1.1 429") {
		e.dumpLogs()
		t.Fatalf("result %+v; log:\n%s", res, logs)
	}
	if peak > 1<<30 {
		t.Fatalf("the worker's resident memory peaked at %d MiB under the attack", peak>>20)
	}
	t.Logf("worker peak RSS %d MiB; %s", peak>>20, strings.TrimSpace(logs[strings.LastIndex(logs, "gwdos answers"):]))
}
