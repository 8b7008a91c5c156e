package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

// prometheus is a real Prometheus server scraping one target every second.
type prometheus struct {
	t    *testing.T
	base string
}

func startPrometheus(t *testing.T, target string) *prometheus {
	t.Helper()
	bin := testenv.Tool(t, "prometheus", "apt-get install prometheus")
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: mlrb-worker\n    static_configs:\n      - targets: ['%s']\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port))
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = logf.Close() })
	p := &prometheus{t: t, base: "http://127.0.0.1:" + strconv.Itoa(port)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(p.base + "/-/ready"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Fatalf("prometheus never became ready:\n%s", b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sample is one series of an instant query: its labels, the time of its
// sample and its value.
type sample struct {
	Labels map[string]string
	At     float64
	Value  float64
}

// query asks Prometheus's HTTP query API for an instant vector.
func (p *prometheus) query(q string) []sample {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		p.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		p.t.Fatalf("query %s: %v %s", q, err, body.Error)
	}
	out := make([]sample, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		at, _ := r.Value[0].(float64)
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			p.t.Fatalf("query %s: value %v", q, r.Value[1])
		}
		out = append(out, sample{Labels: r.Metric, At: at, Value: v})
	}
	return out
}

// one is the value of a query that must give one series (NaN: none yet).
func (p *prometheus) one(q string) float64 {
	p.t.Helper()
	s := p.query(q)
	switch len(s) {
	case 0:
		return math.NaN()
	case 1:
		return s[0].Value
	}
	p.t.Fatalf("query %s: %d series, want one", q, len(s))
	return 0
}

// eventually retries check (which says what it still misses) until it
// says nothing.
func eventually(t *testing.T, e *env, within time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		miss := check()
		if miss == "" {
			return
		}
		if time.Now().After(deadline) {
			e.dumpLogs()
			t.Fatal(miss)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

type metricsStatus struct {
	Phase              string     `json:"phase"`
	Checkpoints        int        `json:"checkpoints"`
	LastCheckpointAgeS *float64   `json:"last_checkpoint_age_s"`
	LastCheckpointAt   *time.Time `json:"last_checkpoint_at"`
}

// TestPrometheusScrapesTheWorker: a real Prometheus scrapes a worker
// while one run holds its only slot and another waits for it. Read back
// through Prometheus's query API, the holder's last checkpoint and its
// age, the runs by phase and the slots in use and free are what `starter
// status` and `starter hosts` say; the SDK's own metrics are there too.
// Once the holder is canceled the waiter gets the slot: its lease wait
// and the canceled outcome reach Prometheus.
func TestPrometheusScrapesTheWorker(t *testing.T) {
	parallel(t)
	metricsPort := freePort(t)
	target := "127.0.0.1:" + strconv.Itoa(metricsPort)
	e := newEnv(t, "MLRB_CHECKPOINT_INTERVAL=5s", "MLRB_HOST_MAX_AGENTS=1", "MLRB_METRICS_LISTEN="+target)
	e.addTask("e2e_long", "mini_baby_lm", map[string]string{"trials: 24": "trials: 100", "trial_seconds: 0.4": "trial_seconds: 0.8"})
	prom := startPrometheus(t, target)
	e.start("worker", "--dev")
	e.waitServer()
	holder := e.startRun("--task", "e2e_long", "--agent", "reference", "--seed", "1", "--time-limit", "120s")
	e.waitCheckpoints(holder, 1)
	waiter := e.startRun("--task", "e2e_long", "--agent", "reference", "--seed", "2", "--time-limit", "120s")

	// The holder's last checkpoint: the same instant in both, and the
	// age Prometheus scraped counts from it.
	eventually(t, e, 30*time.Second, func() string {
		var st metricsStatus
		e.starterJSON(&st, "status", holder, "--json")
		if st.LastCheckpointAt == nil || st.LastCheckpointAgeS == nil {
			return fmt.Sprintf("status of %s has no checkpoint: %+v", holder, st)
		}
		at := float64(st.LastCheckpointAt.UnixNano()) / 1e9
		last := prom.query(fmt.Sprintf(`mlrb_checkpoint_last_timestamp_seconds{run=%q}`, holder))
		age := prom.query(fmt.Sprintf(`mlrb_checkpoint_age_seconds{run=%q}`, holder))
		if len(last) != 1 || len(age) != 1 {
			return fmt.Sprintf("prometheus has %d last-checkpoint and %d age series for %s", len(last), len(age), holder)
		}
		if math.Abs(last[0].Value-at) > 0.001 {
			return fmt.Sprintf("last checkpoint: prometheus %.3f, status %.3f", last[0].Value, at)
		}
		// The age was taken at the scrape, up to a scrape before the query.
		if from := age[0].At - age[0].Value; from < at-0.05 || from > at+1.5 {
			return fmt.Sprintf("age %.2f s at %.2f counts from %.2f, status's checkpoint is at %.2f", age[0].Value, age[0].At, from, at)
		}
		if age[0].Labels["task"] != "e2e_long" || age[0].Labels["agent"] != "reference" || age[0].Labels["attempt"] != "1" {
			return fmt.Sprintf("age labels %v", age[0].Labels)
		}
		return ""
	})
	// Runs by phase, counted by the server, against each run's status.
	eventually(t, e, 30*time.Second, func() string {
		phases := map[string]float64{}
		for _, id := range []string{holder, waiter} {
			var st metricsStatus
			e.starterJSON(&st, "status", id, "--json")
			phases[st.Phase]++
		}
		if phases["running"] != 1 || phases["leasing"] != 1 {
			return fmt.Sprintf("statuses are in %v, want one running and one leasing", phases)
		}
		for phase, n := range phases {
			if got := prom.one(fmt.Sprintf(`mlrb_runs{phase=%q}`, phase)); got != n {
				return fmt.Sprintf("mlrb_runs{phase=%q} = %v, statuses say %v", phase, got, n)
			}
		}
		if got := prom.one(`sum(mlrb_runs)`); got != 2 {
			return fmt.Sprintf("sum(mlrb_runs) = %v, want 2", got)
		}
		return ""
	})
	// Slots, against `starter hosts`.
	eventually(t, e, 30*time.Second, func() string {
		h := e.hosts()
		if len(h) != 1 {
			return fmt.Sprintf("hosts: %+v", h)
		}
		inUse, free := prom.one(`mlrb_gpu_slots{state="in_use"}`), prom.one(`mlrb_gpu_slots{state="free"}`)
		if inUse != float64(h[0].InUse) || free != float64(h[0].Free) || inUse != 1 {
			return fmt.Sprintf("slots: prometheus %v in use, %v free; starter hosts %d and %d", inUse, free, h[0].InUse, h[0].Free)
		}
		return ""
	})
	eventually(t, e, 30*time.Second, func() string {
		if n := prom.one(`sum(mlrb_checkpoints_total{result="committed"})`); !(n >= 1) {
			return fmt.Sprintf("committed checkpoints: %v", n)
		}
		if n := prom.one(`sum(mlrb_checkpoint_new_bytes_total)`); !(n > 0) {
			return fmt.Sprintf("checkpoint new bytes: %v", n)
		}
		if n := prom.one(`count({__name__=~"temporal_.+"})`); !(n > 10) {
			return fmt.Sprintf("the SDK's metrics: %v series", n)
		}
		return ""
	})

	if out, errs, code := e.starter("cancel", holder); code != 0 {
		t.Fatalf("cancel: %s %s", out, errs)
	}
	eventually(t, e, 60*time.Second, func() string {
		var st metricsStatus
		e.starterJSON(&st, "status", waiter, "--json")
		if st.Phase != "running" {
			return "the waiter is " + st.Phase
		}
		if n := prom.one(`sum(mlrb_lease_wait_seconds_count)`); !(n >= 2) {
			return fmt.Sprintf("leases granted: %v, want both runs'", n)
		}
		if s := prom.one(`sum(mlrb_lease_wait_seconds_sum)`); !(s >= 1) {
			return fmt.Sprintf("lease wait in all: %v s", s)
		}
		if n := prom.one(`mlrb_runs_ended{outcome="canceled"}`); n != 1 {
			return fmt.Sprintf("canceled runs: %v", n)
		}
		if n := prom.one(`mlrb_runs{phase="leasing"}`); n != 0 {
			return fmt.Sprintf("runs leasing: %v", n)
		}
		return ""
	})
	if out, errs, code := e.starter("cancel", waiter); code != 0 {
		t.Fatalf("cancel: %s %s", out, errs)
	}
}
