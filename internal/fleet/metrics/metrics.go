// The worker's Prometheus metrics: mlrb's figures beside the SDK's.

// Package metrics is a worker's Prometheus endpoint: the Temporal SDK's
// own metrics (through its OpenTelemetry contrib) and mlrb's, from the
// activities this worker runs (checkpoints, evaluations, the running
// attempts' checkpoint age), its GPU pool, and optionally the run counts
// by phase and outcome the Temporal server keeps for the whole fleet.
// The workflows' own figures (lease wait, lost and infra-wait time) go
// through the SDK's handler, which leaves out replays.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.uber.org/zap"
)

// Buckets, in seconds, for everything timed here: from a workflow task's
// milliseconds to a 20 GB checkpoint's minutes and a day-long lease wait.
var Buckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600}

// Metrics is one worker's registry. A nil *Metrics records nothing, so
// code paths without an endpoint (tests, the starter) need no checks.
type Metrics struct {
	reg      *prometheus.Registry
	provider *sdkmetric.MeterProvider
	sdk      client.MetricsHandler

	ckDuration *prometheus.HistogramVec
	ckTotal    *prometheus.CounterVec
	ckBytes    prometheus.Counter
	ckNew      prometheus.Counter
	evDuration *prometheus.HistogramVec
	evTotal    *prometheus.CounterVec

	mu      sync.Mutex
	running map[*Attempt]struct{}
}

// New builds the registry with the Go runtime and process collectors.
func New() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo(),
		otelprom.WithAggregationSelector(func(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
			if k == sdkmetric.InstrumentKindHistogram {
				return sdkmetric.AggregationExplicitBucketHistogram{Boundaries: Buckets}
			}
			return sdkmetric.DefaultAggregationSelector(k)
		}))
	if err != nil {
		return nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	m := &Metrics{
		reg: reg, provider: provider,
		sdk: temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
			Meter: provider.Meter("temporal-sdk-go"), UseMonotonicCounters: true,
			// A metric the SDK cannot record is not worth a worker.
			OnError: func(error) {},
		}),
		ckDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mlrb_checkpoint_duration_seconds",
			Help: "Time to take and commit one checkpoint (snapshot, upload of new chunks, manifest), by kind (periodic or final).", Buckets: Buckets}, []string{"kind"}),
		ckTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mlrb_checkpoints_total",
			Help: "Checkpoints attempted, by result (committed or failed)."}, []string{"result"}),
		ckBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "mlrb_checkpoint_bytes_total",
			Help: "Workspace bytes the committed checkpoints cover."}),
		ckNew: prometheus.NewCounter(prometheus.CounterOpts{Name: "mlrb_checkpoint_new_bytes_total",
			Help: "Bytes the committed checkpoints uploaded (chunks the store did not hold yet)."}),
		evDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mlrb_evaluation_duration_seconds",
			Help: "Time of one evaluation activity, by task and result.", Buckets: Buckets}, []string{"task", "result"}),
		evTotal: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mlrb_evaluations_total",
			Help: "Evaluations run, by task and result (ok or failed)."}, []string{"task", "result"}),
		running: map[*Attempt]struct{}{},
	}
	reg.MustRegister(m.ckDuration, m.ckTotal, m.ckBytes, m.ckNew, m.evDuration, m.evTotal, attempts{m})
	return m, nil
}

// SDK is the handler for the Temporal client's options (nil: the SDK's
// no-op default).
func (m *Metrics) SDK() client.MetricsHandler {
	if m == nil {
		return nil
	}
	return m.sdk
}

// Collector is what Register takes.
type Collector = prometheus.Collector

// Unregister removes what Register added (a worker that failed to start,
// started again in the same process).
func (m *Metrics) Unregister(c Collector) {
	if m != nil {
		m.reg.Unregister(c)
	}
}

// Register adds a collector (the GPU pool's, the fleet's).
func (m *Metrics) Register(c Collector) error {
	if m == nil {
		return nil
	}
	if err := m.reg.Register(c); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// Handler serves the registry in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Serve listens on addr and serves /metrics until stop is called. The
// listener is bound before Serve returns: a port taken is an error here,
// not a log line later.
func (m *Metrics) Serve(addr string, log *zap.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics endpoint stopped", zap.Error(err))
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = m.provider.Shutdown(ctx)
	}, nil
}

// Evaluation records one evaluation activity.
func (m *Metrics) Evaluation(task string, d time.Duration, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "failed"
	}
	m.evTotal.WithLabelValues(task, result).Inc()
	m.evDuration.WithLabelValues(task, result).Observe(d.Seconds())
}

// Attempt is a running agent attempt on this worker, exported with the
// time of its run's last checkpoint while it runs.
type Attempt struct {
	m                 *Metrics
	run, task, agent  string
	attempt           int
	started, lastSave time.Time
}

// AttemptStarted registers a running attempt; last is its run's last
// checkpoint before it (zero: none yet). End it with Ended.
func (m *Metrics) AttemptStarted(run, task, agent string, attempt int, last time.Time) *Attempt {
	if m == nil {
		return nil
	}
	a := &Attempt{m: m, run: run, task: task, agent: agent, attempt: attempt, started: time.Now(), lastSave: last}
	m.mu.Lock()
	m.running[a] = struct{}{}
	m.mu.Unlock()
	return a
}

// Checkpoint records one of the attempt's checkpoints, taken in d: a
// committed one (err nil, at its commit time) counts its bytes and moves
// the attempt's last checkpoint to at.
func (a *Attempt) Checkpoint(d time.Duration, final bool, at time.Time, bytes, newBytes int64, err error) {
	if a == nil {
		return
	}
	m := a.m
	if err != nil {
		m.ckTotal.WithLabelValues("failed").Inc()
		return
	}
	kind := "periodic"
	if final {
		kind = "final"
	}
	m.ckTotal.WithLabelValues("committed").Inc()
	m.ckDuration.WithLabelValues(kind).Observe(d.Seconds())
	m.ckBytes.Add(float64(bytes))
	m.ckNew.Add(float64(newBytes))
	m.mu.Lock()
	if at.After(a.lastSave) {
		a.lastSave = at
	}
	m.mu.Unlock()
}

// Ended drops the attempt's series.
func (a *Attempt) Ended() {
	if a == nil {
		return
	}
	a.m.mu.Lock()
	delete(a.m.running, a)
	a.m.mu.Unlock()
}

var (
	attemptLabels = []string{"run", "task", "agent", "attempt"}
	descStarted   = prometheus.NewDesc("mlrb_attempt_started_timestamp_seconds",
		"When each agent attempt running on this worker started (Unix time).", attemptLabels, nil)
	descLastSave = prometheus.NewDesc("mlrb_checkpoint_last_timestamp_seconds",
		"When the run of each attempt running on this worker last committed a checkpoint (Unix time); absent before its first.", attemptLabels, nil)
	descAge = prometheus.NewDesc("mlrb_checkpoint_age_seconds",
		"Seconds since the run of each attempt running on this worker last committed a checkpoint, at the scrape; absent before its first.", attemptLabels, nil)
)

// attempts exports the running attempts at scrape time, so that an
// age is as old as the scrape and an ended attempt leaves no series.
type attempts struct{ m *Metrics }

func (attempts) Describe(ch chan<- *prometheus.Desc) {
	ch <- descStarted
	ch <- descLastSave
	ch <- descAge
}

func (c attempts) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	c.m.mu.Lock()
	list := make([]Attempt, 0, len(c.m.running))
	for a := range c.m.running {
		list = append(list, *a)
	}
	c.m.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].run < list[j].run })
	for _, a := range list {
		lv := []string{a.run, a.task, a.agent, strconv.Itoa(a.attempt)}
		ch <- prometheus.MustNewConstMetric(descStarted, prometheus.GaugeValue, unix(a.started), lv...)
		if !a.lastSave.IsZero() {
			ch <- prometheus.MustNewConstMetric(descLastSave, prometheus.GaugeValue, unix(a.lastSave), lv...)
			ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue, now.Sub(a.lastSave).Seconds(), lv...)
		}
	}
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
