package runresults

import (
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/gpucost"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
)

// TestPriceGPUs: a result's GPU dollars are its billed GPU-hours at its
// class's rate, named with the table; each mark's cost is the GPUs for
// the agent time by then plus the LLM calls that had ended; a class the
// table does not price stays unpriced, a CPU run costs nothing.
func TestPriceGPUs(t *testing.T) {
	table, err := gpucost.Parse([]byte("date: \"2026-01-01\"\ngpus:\n  A100-40GB: 2.0\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	obs := []*observe.Observation{{Start: t0, StartAgentS: 0, Calls: []observe.Span{
		{Start: t0.Add(590 * time.Second), End: t0.Add(600 * time.Second), USD: 0.5},
		{Start: t0.Add(1990 * time.Second), End: t0.Add(2000 * time.Second), USD: 1.0},
	}}}
	r := &runs.Result{Hardware: runs.HardwareClass(1, "A100-40GB"), Cost: runs.Cost{BilledGPUHours: 2}, Curve: []runs.Mark{{AtS: 1800}, {AtS: 3600}}}
	PriceGPUs(r, table, obs)
	if r.Cost.GPUUSD == nil || *r.Cost.GPUUSD != 4 || r.Cost.GPUPrices == nil || r.Cost.GPUPrices.Date != "2026-01-01" || r.Cost.GPUPrices.USDPerGPUHour != 2 {
		t.Fatalf("cost %+v %+v", r.Cost, r.Cost.GPUPrices)
	}
	for i, want := range []float64{1.5, 3.5} {
		if c := r.Curve[i].CostUSD; c == nil || *c != want {
			t.Fatalf("mark %d costs %v, want %v", i, c, want)
		}
	}
	other := &runs.Result{Hardware: runs.HardwareClass(8, "H100-80GB"), Cost: runs.Cost{BilledGPUHours: 2}, Curve: []runs.Mark{{AtS: 10}}}
	PriceGPUs(other, table, nil)
	if other.Cost.GPUUSD != nil || other.Curve[0].CostUSD != nil {
		t.Fatalf("an unpriced class was priced: %+v", other.Cost)
	}
	cpu := &runs.Result{Hardware: runs.HardwareClass(0, ""), Cost: runs.Cost{BilledGPUHours: 0}}
	PriceGPUs(cpu, table, nil)
	if cpu.Cost.GPUUSD == nil || *cpu.Cost.GPUUSD != 0 {
		t.Fatalf("a CPU run: %+v", cpu.Cost)
	}
	if n, typ := runs.ParseHardware("2× GPU"); n != 2 || typ != "" {
		t.Fatalf("2× GPU read as %d %q", n, typ)
	}
}

func TestGPUPriceTables(t *testing.T) {
	if b, err := gpucost.Load(""); err != nil || b.Date == "" {
		t.Fatalf("built-in table: %v", err)
	}
	for body, want := range map[string]string{
		"gpus: {A100-40GB: 1}\n":                        "date",
		"date: \"2026-01-01\"\ngpus: {A100-40GB: -1}\n": "from 0",
		"date: \"2026-01-01\"\ngpu: {}\n":               "field gpu not found",
	} {
		if _, err := gpucost.Parse([]byte(body), "t"); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: %v, want %q", body, err, want)
		}
	}
}
