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

	"google.golang.org/protobuf/proto"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/attempt"
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
// as usual. The body timeout is the worker's gateway.body_timeout, 10 s
// here (a minute by default): the calls it cuts say so.
func TestGatewayBodyAttack(t *testing.T) {
	parallel(t)
	testtaskImage(t, "mlrb-gwdos:e2e", "gwdos", "60")
	e := containerAgentEnv(t, "MLRB_GATEWAY_BODY_TIMEOUT=10s")
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
	if calls, errs, code := e.starter("calls", res.RunID, "--json"); code != 0 || !strings.Contains(calls, "did not arrive whole within 10s") {
		t.Fatalf("starter calls (exit %d): no call cut at the configured body timeout: %s\n%s", code, errs, calls)
	}
	t.Logf("worker peak RSS %d MiB; %s", peak>>20, strings.TrimSpace(logs[strings.LastIndex(logs, "gwdos answers"):]))
}

// TestRefusedCallFlood (audit F1, F2, in a real container): an agent
// sends its door calls naming a 1.5 MiB model, four at a time, for 20 s
// (MLRB_E2E_FLOOD_SECONDS: the audit's five minutes are 300), to a worker
// whose gateway.usage_every is 2 s. Its run's history stays small (it
// grows with time, never with what the agent sends: a usage signal at
// most at each of the worker's polls, activities.PollEvery apart; ledger
// keys the price table's), its calls and cost stay readable, and it ends
// as its agent did, scored, never infra_failed.
func TestRefusedCallFlood(t *testing.T) {
	parallel(t)
	secs := 20
	if s, err := strconv.Atoi(os.Getenv("MLRB_E2E_FLOOD_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	testtaskImage(t, "mlrb-flood:e2e", "flood", strconv.Itoa(secs))
	// The flood must last its whole length: the bytes its door refuses
	// (gigabytes in 20 s) would stop it at gateway.max_refused_mb, a
	// limit TestAdversaries' bigrefused holds.
	e := containerAgentEnv(t, "MLRB_GATEWAY_USAGE_EVERY=2s", "MLRB_GATEWAY_MAX_REFUSED_MB=1048576")
	e.timeout = time.Duration(secs+180) * time.Second
	var res result
	e.starterJSON(&res, "run", "--task", "e2e_container", "--label", "e2e-image", "--image", "mlrb-flood:e2e", "--provider", "openai",
		"--seed", "1", "--time-limit", strconv.Itoa(secs+90)+"s", "--wait", "--json")
	logs, _, _ := e.starter("logs", res.RunID)
	if res.Outcome != "scored" || !strings.Contains(logs, "flood answers: map[400:") {
		e.dumpLogs()
		t.Fatalf("result %+v; log:\n%s", res, logs)
	}
	var size, reports int
	for _, ev := range e.history(res.RunID).Events {
		size += proto.Size(ev)
		if ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == activities.SignalUsage {
			reports++
		}
	}
	// The worker polls every activities.PollEvery (5 s) and may report at
	// each poll (2 s have passed): 20 s of calls give the first report,
	// the last one and some between (with the default minute, none
	// between: the interval reached the worker), and never one a call.
	if size > 10<<20 || reports < 3 || reports > secs/int(attempt.PollEvery/time.Second)+3 {
		t.Fatalf("the run's history holds %d KiB, %d usage reports", size>>10, reports)
	}
	out, errs, code := e.starter("calls", res.RunID, "--json")
	if code != 0 {
		t.Fatalf("starter calls (exit %d): %s", code, errs)
	}
	refused := strings.Count(out, "\n")
	var full struct {
		Cost struct {
			LLM *struct {
				Refused int64 `json:"refused"`
			} `json:"llm"`
		} `json:"cost"`
	}
	e.starterJSON(&full, "result", res.RunID, "--json")
	if full.Cost.LLM == nil || full.Cost.LLM.Refused < 10 || refused < 10 {
		t.Fatalf("the run's LLM ledger %+v, %d calls listed", full.Cost.LLM, refused)
	}
	t.Logf("%d refused calls; the run's history %d KiB, %d usage reports; %s", full.Cost.LLM.Refused, size>>10, reports, strings.TrimSpace(logs[strings.LastIndex(logs, "flood answers"):]))
}
