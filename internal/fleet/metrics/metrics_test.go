package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/fleet/gpu"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(text, l+"\n") {
			t.Errorf("scrape has no line %q", l)
		}
	}
}

// TestExports: what the activities and the pool record is in the scrape,
// with the SDK's own metrics beside it; an ended attempt leaves nothing.
func TestExports(t *testing.T) {
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	last := time.Unix(1700000000, 500_000_000)
	a := m.AttemptStarted("run-1", "mini_baby_lm", "reference", 2, last)
	fresh := m.AttemptStarted("run-2", "mini_llm_merging", "noop", 1, time.Time{})
	a.Checkpoint(3*time.Second, false, last.Add(10*time.Second), 1000, 400, nil)
	a.Checkpoint(time.Second, true, last, 1500, 100, nil) // an older one never moves it back
	fresh.Checkpoint(time.Second, false, time.Time{}, 0, 0, errors.New("store down"))
	m.Evaluation("mini_baby_lm", 2*time.Second, nil)
	m.Evaluation("mini_baby_lm", time.Second, errors.New("evaluator crashed"))
	if err := m.Register(GPUs(func() gpu.Occupancy {
		return gpu.Occupancy{SlotsInUse: 1, SlotsFree: 3, DevicesInUse: 1, DevicesFree: 1}
	})); err != nil {
		t.Fatal(err)
	}
	m.SDK().Counter("temporal_probe").Inc(2)
	m.SDK().Timer("mlrb_lease_wait").Record(90 * time.Second)

	text := scrape(t, m)
	wantLines(t, text,
		`mlrb_checkpoint_last_timestamp_seconds{agent="reference",attempt="2",run="run-1",task="mini_baby_lm"} 1.7000000105e+09`,
		`mlrb_checkpoints_total{result="committed"} 2`,
		`mlrb_checkpoints_total{result="failed"} 1`,
		`mlrb_checkpoint_bytes_total 2500`,
		`mlrb_checkpoint_new_bytes_total 500`,
		`mlrb_checkpoint_duration_seconds_count{kind="periodic"} 1`,
		`mlrb_checkpoint_duration_seconds_sum{kind="final"} 1`,
		`mlrb_evaluations_total{result="failed",task="mini_baby_lm"} 1`,
		`mlrb_evaluation_duration_seconds_sum{result="ok",task="mini_baby_lm"} 2`,
		`mlrb_gpu_slots{state="in_use"} 1`,
		`mlrb_gpu_slots{state="free"} 3`,
		`mlrb_gpu_devices{state="free"} 1`,
		`temporal_probe_total 2`,
		`mlrb_lease_wait_seconds_sum 90`,
		`mlrb_lease_wait_seconds_bucket{le="120"} 1`,
		`mlrb_lease_wait_seconds_bucket{le="60"} 0`,
	)
	if !strings.Contains(text, `mlrb_checkpoint_age_seconds{agent="reference",attempt="2",run="run-1",task="mini_baby_lm"}`) {
		t.Error("no checkpoint age for the attempt that has a checkpoint")
	}
	if strings.Contains(text, `mlrb_checkpoint_age_seconds{agent="noop"`) || !strings.Contains(text, `mlrb_attempt_started_timestamp_seconds{agent="noop"`) {
		t.Error("an attempt whose run has no checkpoint yet must show as started, with no age")
	}
	a.Ended()
	fresh.Ended()
	if text := scrape(t, m); strings.Contains(text, `run="run-1"`) || strings.Contains(text, `run="run-2"`) {
		t.Error("ended attempts still exported")
	}
}

// TestNilRecordsNothing: a worker without an endpoint passes a nil
// *Metrics everywhere.
func TestNilRecordsNothing(t *testing.T) {
	var m *Metrics
	m.Evaluation("t", time.Second, nil)
	a := m.AttemptStarted("r", "t", "a", 1, time.Now())
	a.Checkpoint(time.Second, true, time.Now(), 1, 1, nil)
	a.Ended()
	if m.SDK() != nil || m.Register(GPUs(func() gpu.Occupancy { return gpu.Occupancy{} })) != nil {
		t.Fatal("a nil Metrics hands out a handler or refuses a collector")
	}
}

// TestFleet: the counts are asked once per TTL however often it is
// scraped, and a count the server refuses leaves every figure out and
// says so, instead of exporting a partial set.
func TestFleet(t *testing.T) {
	var calls atomic.Int32
	var fail atomic.Bool
	f := NewFleet(func(_ context.Context, q string) (int64, error) {
		calls.Add(1)
		if fail.Load() {
			return 0, errors.New("unavailable")
		}
		return int64(len(q)), nil
	}, []Count{{Value: "running", Query: "abc"}, {Value: "leasing", Query: "ab"}}, []Count{{Value: "scored", Query: "abcd"}})
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Register(f); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, m)
	wantLines(t, text, `mlrb_runs{phase="running"} 3`, `mlrb_runs{phase="leasing"} 2`, `mlrb_runs_ended{outcome="scored"} 4`, `mlrb_fleet_up 1`)
	scrape(t, m)
	if n := calls.Load(); n != 3 {
		t.Fatalf("two scrapes within the TTL made %d counts, want 3", n)
	}
	fail.Store(true)
	f.at = time.Time{}
	text = scrape(t, m)
	wantLines(t, text, `mlrb_fleet_up 0`)
	if strings.Contains(text, "mlrb_runs{") {
		t.Error("a failed count still exports run figures")
	}
}

// TestDashboardNamesExported: every mlrb metric the Grafana dashboard
// queries is one a worker exports, so a renamed metric cannot leave a
// panel silently empty.
func TestDashboardNamesExported(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "grafana", "mlrb-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	a := m.AttemptStarted("r", "t", "a", 1, time.Now())
	defer a.Ended()
	a.Checkpoint(time.Second, false, time.Now(), 1, 1, nil)
	a.Checkpoint(time.Second, false, time.Time{}, 1, 1, errors.New("x"))
	m.Evaluation("t", time.Second, nil)
	for _, name := range []string{"mlrb_lease_wait", "mlrb_infra_wait", "mlrb_attempt_lost"} {
		m.SDK().Timer(name).Record(time.Second)
	}
	if err := m.Register(GPUs(func() gpu.Occupancy { return gpu.Occupancy{} })); err != nil {
		t.Fatal(err)
	}
	count := func(context.Context, string) (int64, error) { return 1, nil }
	if err := m.Register(NewFleet(count, []Count{{Value: "running"}}, []Count{{Value: "scored"}})); err != nil {
		t.Fatal(err)
	}
	text := scrape(t, m)
	names := regexp.MustCompile(`\bmlrb_[a-z_]+`)
	seen := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range names.FindAllString(tg.Expr, -1) {
				seen++
				if !strings.Contains(text, "\n"+n+"{") && !strings.Contains(text, "\n"+n+" ") {
					t.Errorf("the dashboard queries %s, which no worker exports", n)
				}
			}
		}
	}
	if seen < 10 {
		t.Fatalf("the dashboard names only %d mlrb metrics", seen)
	}
}
