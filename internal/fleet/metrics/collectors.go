// GPUs exports a host's pool as it is at the scrape.

package metrics

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mlrb/mlrb/internal/fleet/gpu"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
)

var (
	descSlots = prometheus.NewDesc("mlrb_gpu_slots",
		"This host's agent slots (one per lease, as `starter hosts` shows), by state (in_use or free).", []string{"state"}, nil)
	descDevices = prometheus.NewDesc("mlrb_gpu_devices",
		"This host's GPU devices, by state (in_use or free).", []string{"state"}, nil)
)

// GPUs exports a host's pool as it is at the scrape.
func GPUs(usage func() gpu.Occupancy) prometheus.Collector { return gpus(usage) }

type gpus func() gpu.Occupancy

func (gpus) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSlots
	ch <- descDevices
}

func (g gpus) Collect(ch chan<- prometheus.Metric) {
	u := g()
	ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(u.SlotsInUse), "in_use")
	ch <- prometheus.MustNewConstMetric(descSlots, prometheus.GaugeValue, float64(u.SlotsFree), "free")
	ch <- prometheus.MustNewConstMetric(descDevices, prometheus.GaugeValue, float64(u.DevicesInUse), "in_use")
	ch <- prometheus.MustNewConstMetric(descDevices, prometheus.GaugeValue, float64(u.DevicesFree), "free")
}

var (
	descGPUUtil = prometheus.NewDesc("mlrb_gpu_utilization_percent",
		"Utilisation of this host's leased GPUs as the attempt holding each last sampled it (observe.gpu_interval), by device index.", []string{"device"}, nil)
	descGPUMem = prometheus.NewDesc("mlrb_gpu_memory_used_mib",
		"Memory used on this host's leased GPUs, as last sampled, by device index.", []string{"device"}, nil)
	descGPUPower = prometheus.NewDesc("mlrb_gpu_power_watts",
		"Power drawn by this host's leased GPUs, as last sampled, by device index (where the GPU reports it).", []string{"device"}, nil)
)

// GPUSamples exports the last samples of the leased GPUs.
func GPUSamples(fresh func() []observe.GPUSample) prometheus.Collector { return gpuSamples(fresh) }

type gpuSamples func() []observe.GPUSample

func (gpuSamples) Describe(ch chan<- *prometheus.Desc) {
	ch <- descGPUUtil
	ch <- descGPUMem
	ch <- descGPUPower
}

func (g gpuSamples) Collect(ch chan<- prometheus.Metric) {
	for _, s := range g() {
		d := strconv.Itoa(s.Index)
		ch <- prometheus.MustNewConstMetric(descGPUUtil, prometheus.GaugeValue, s.Util, d)
		ch <- prometheus.MustNewConstMetric(descGPUMem, prometheus.GaugeValue, s.MemMiB, d)
		if s.PowerW != nil {
			ch <- prometheus.MustNewConstMetric(descGPUPower, prometheus.GaugeValue, *s.PowerW, d)
		}
	}
}

// Count is one figure of the fleet: how many runs a visibility query
// finds, exported under its label value.
type Count struct {
	Value string // the phase or outcome
	Query string
}

var (
	descRuns = prometheus.NewDesc("mlrb_runs",
		"Runs under way in the namespace, by phase (counted by the Temporal server's visibility store).", []string{"phase"}, nil)
	descEnded = prometheus.NewDesc("mlrb_runs_ended",
		"Runs ended within the namespace's retention, by outcome (counted by the Temporal server's visibility store).", []string{"outcome"}, nil)
	descFleetUp = prometheus.NewDesc("mlrb_fleet_up",
		"1 when the last count of runs by phase and outcome succeeded, 0 when the Temporal server did not answer it.", nil, nil)
)

// fleetTTL bounds the counts one worker asks for: scrapes closer than
// this (two Prometheus servers, a dashboard refresh) share one count.
const fleetTTL = 5 * time.Second

// Fleet exports the run counts every worker would see alike: one
// visibility count per phase and outcome, at most once per fleetTTL.
type Fleet struct {
	count          func(ctx context.Context, query string) (int64, error)
	running, ended []Count

	mu   sync.Mutex
	at   time.Time
	last []prometheus.Metric
}

// NewFleet counts with count (a CountWorkflow call).
func NewFleet(count func(ctx context.Context, query string) (int64, error), running, ended []Count) *Fleet {
	return &Fleet{count: count, running: running, ended: ended}
}

// Describe implements prometheus.Collector.
func (*Fleet) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRuns
	ch <- descEnded
	ch <- descFleetUp
}

// Collect implements prometheus.Collector.
func (f *Fleet) Collect(ch chan<- prometheus.Metric) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.at) > fleetTTL {
		f.last, f.at = f.counts(), time.Now()
	}
	for _, m := range f.last {
		ch <- m
	}
}

// counts asks every count within one scrape's patience; a failed one
// leaves out all the figures (a partial set would mislead a sum) and
// says so in mlrb_fleet_up.
func (f *Fleet) counts() []prometheus.Metric {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	var out []prometheus.Metric
	for _, set := range []struct {
		desc   *prometheus.Desc
		counts []Count
	}{{descRuns, f.running}, {descEnded, f.ended}} {
		for _, c := range set.counts {
			n, err := f.count(ctx, c.Query)
			if err != nil {
				return []prometheus.Metric{prometheus.MustNewConstMetric(descFleetUp, prometheus.GaugeValue, 0)}
			}
			out = append(out, prometheus.MustNewConstMetric(set.desc, prometheus.GaugeValue, float64(n), c.Value))
		}
	}
	return append(out, prometheus.MustNewConstMetric(descFleetUp, prometheus.GaugeValue, 1))
}
