package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

type hostRow struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	InUse  int    `json:"in_use"`
	Free   int    `json:"free"`
	Leases []struct {
		Token string `json:"token"`
	} `json:"leases"`
}

func (e *env) hosts() []hostRow {
	e.t.Helper()
	var rows []hostRow
	e.starterJSON(&rows, "hosts", "--json")
	return rows
}

// TestTerminatedRunFreesItsSlot: on a one-slot host a run holds the slot
// and a second one waits, its status counting the wait as it grows.
// The first is terminated with the official temporal CLI, as an operator
// would: its agent stops, and at the waiting run's next try its lease is
// taken back (its owner has ended), long before the lease TTL (10 min
// here), and the waiting run gets the slot.
func TestTerminatedRunFreesItsSlot(t *testing.T) {
	parallel(t)
	temporal := testenv.Tool(t, "temporal", installTemporal)
	e := newEnv(t, "MLRB_CHECKPOINT_INTERVAL=2s", "MLRB_AGENT_HEARTBEAT_TIMEOUT=4s", "MLRB_HOST_MAX_AGENTS=1",
		"MLRB_HOST_LEASE_TTL=10m")
	e.addTask("e2e_long", "mini_baby_lm", map[string]string{"trials: 24": "trials: 100", "trial_seconds: 0.4": "trial_seconds: 0.8"})
	e.start("worker", "--dev")
	e.waitServer()
	holder := e.startRun("--task", "e2e_long", "--agent", "reference", "--seed", "1", "--time-limit", "120s")
	e.waitCheckpoints(holder, 1)
	waiter := e.startRun("--task", "e2e_long", "--agent", "reference", "--seed", "2", "--time-limit", "120s")

	var st struct {
		Phase      string   `json:"phase"`
		LeaseWaitS *float64 `json:"lease_wait_s"`
		Budget     struct {
			InfraWaitS float64 `json:"infra_wait_s"`
		} `json:"budget"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for st.LeaseWaitS == nil || *st.LeaseWaitS < 3 {
		if time.Now().After(deadline) {
			e.dumpLogs()
			t.Fatalf("the waiting run's status: %+v", st)
		}
		time.Sleep(500 * time.Millisecond)
		e.starterJSON(&st, "status", waiter, "--json")
	}
	if st.Phase != "leasing" || st.Budget.InfraWaitS < *st.LeaseWaitS {
		t.Fatalf("waiting: phase %s, lease wait %.1f s, infra wait %.1f s", st.Phase, *st.LeaseWaitS, st.Budget.InfraWaitS)
	}
	waited := *st.LeaseWaitS
	if h := e.hosts(); len(h) != 1 || h[0].State != "up" || h[0].InUse != 1 || h[0].Free != 0 || !strings.HasPrefix(h[0].Leases[0].Token, holder+"#") {
		t.Fatalf("hosts = %+v", h)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, temporal, "workflow", "terminate", "--workflow-id", holder, "--reason", "operator",
		"--address", "127.0.0.1:"+strconv.Itoa(e.port), "--namespace", "default").CombinedOutput()
	if err != nil {
		t.Fatalf("temporal workflow terminate: %v\n%s", err, out)
	}
	terminated := time.Now()
	for {
		h := e.hosts()
		if len(h) == 1 && (len(h[0].Leases) == 0 || !strings.HasPrefix(h[0].Leases[0].Token, holder+"#")) {
			break
		}
		// The lease request retries with backoff, at most every 30 s.
		if time.Since(terminated) > 45*time.Second {
			e.dumpLogs()
			t.Fatalf("the terminated run still holds its slot 45 s later (lease TTL 10 min): %+v", h)
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("slot free %s after the terminate", time.Since(terminated).Round(100*time.Millisecond))
	for {
		e.starterJSON(&st, "status", waiter, "--json")
		if st.Phase == "running" {
			break
		}
		if time.Since(terminated) > 60*time.Second {
			e.dumpLogs()
			t.Fatalf("the waiting run never got the slot: %+v", st)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("the waiting run runs %s after the terminate", time.Since(terminated).Round(100*time.Millisecond))
	if _, errs, code := e.starter("cancel", waiter); code != 0 {
		t.Fatalf("cancel: %s", errs)
	}
	var res result
	e.starterJSON(&res, "result", waiter, "--wait", "--json")
	if res.Budget.InfraWaitS < waited {
		t.Fatalf("the waiting run's ledger: %+v", res.Budget)
	}
}

// TestSecondWorkerOnAHostRefused: a worker whose host.id another worker
// polls refuses to start and says why (exit 2); so does one whose work
// dir another worker holds.
func TestSecondWorkerOnAHostRefused(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.start("worker", "--dev")
	e.waitServer()
	// The first worker is up once its host record is published.
	deadline := time.Now().Add(30 * time.Second)
	for len(e.hosts()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the worker never published its host")
		}
		time.Sleep(300 * time.Millisecond)
	}
	run := func(vars ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "worker"))
		cmd.Env = append(append(os.Environ(), e.vars...), vars...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run("MLRB_HOST_WORK_DIR=" + filepath.Join(e.state, "elsewhere"))
	if code != 2 || !strings.Contains(out, `host.id: "e2e" is already polled by another worker`) {
		t.Fatalf("a second worker with the same host.id: exit %d\n%s", code, out)
	}
	out, code = run("MLRB_HOST_ID=other")
	if code != 2 || !strings.Contains(out, "host.work_dir") || !strings.Contains(out, "in use by another worker") {
		t.Fatalf("a second worker on the same work dir: exit %d\n%s", code, out)
	}
	var rows []json.RawMessage
	e.starterJSON(&rows, "hosts", "--json")
	if len(rows) != 1 {
		t.Fatalf("hosts after the refusals: %s", rows)
	}
}
