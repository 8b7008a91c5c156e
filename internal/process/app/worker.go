// Worker is a running worker.

package app

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities/attempt"
	"github.com/mlrb/mlrb/activities/evaluation"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/activities/records"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/fleet/gpu"
	"github.com/mlrb/mlrb/internal/fleet/hosts"
	"github.com/mlrb/mlrb/internal/fleet/metrics"
	"github.com/mlrb/mlrb/internal/run/gpucost"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/sandbox/attach"
	"github.com/mlrb/mlrb/internal/sandbox/gateway"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/evaldata"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/keys"
	"github.com/mlrb/mlrb/tasks"
	"github.com/mlrb/mlrb/workflows"
)

// Worker is a running worker: one SDK worker on the shared queue
// (workflows, task resolution, leases, evaluation) and one on this host's
// queue (agents pinned to the host that holds their lease).
type Worker struct {
	HostQueue string
	// undo stops and closes what the start opened, last opened first.
	undo func()
}

// HostQueue names a host's task queue.
func HostQueue(base, hostID string) string { return base + "-host-" + hostID }

// StartWorker reaps what an earlier worker on this host left running,
// then starts polling. It is a list of named steps, each pushing what
// undoes it: a step that fails undoes every one before it, so a failed
// start leaves nothing held (the work-dir lock, the Docker client, the
// metrics, the SDK workers) and the same process can start again.
func StartWorker(ctx context.Context, cfg *config.Config, c client.Client, logger *zap.Logger, m *metrics.Metrics) (*Worker, error) {
	nameBuild()
	s := &startup{ctx: ctx, cfg: cfg, c: c, log: logger, m: m,
		hq: HostQueue(cfg.Temporal.TaskQueue, cfg.Host.ID), identity: hosts.Identity(cfg.Host.ID, cfg.WorkDir())}
	for _, step := range s.steps() {
		err := step.run()
		if err == nil && failStep != nil {
			err = failStep(step.name)
		}
		if err != nil {
			s.undo()
			return nil, err
		}
	}
	return &Worker{HostQueue: s.hq, undo: s.undo}, nil
}

type step struct {
	name string
	run  func() error
}

// steps are a worker's start, in order.
func (s *startup) steps() []step {
	return []step{
		{"namespace", s.checkNamespace}, {"catalog", s.loadCatalog}, {"engine", s.openEngine}, {"work dir", s.lockWorkDir}, {"host id", s.checkHostFree},
		{"workspace", s.openWorkspace}, {"leases", s.openLeases}, {"activities", s.assemble}, {"attach", s.startAttach}, {"metrics", s.registerMetrics},
		{"provider", s.openProvider}, {"sweep", s.sweep}, {"fleet record", s.startRecord}, {"host worker", s.startHostWorker},
		{"shared worker", s.startSharedWorker}, {"fence", s.startFence},
	}
}

// failStep, for tests, fails the start after the step it names.
var failStep func(step string) error

// Stop stops polling; running agents are stopped and checkpointed (within
// host.stop_timeout), and their attempts handed back to their runs. The
// fence goes first, then the shared queue: a workflow task this worker
// took up while stopping would sit until its timeout instead of going to
// a live worker; then the host queue, the fleet record, the rest.
func (w *Worker) Stop() { w.undo() }

// startup is a worker being started: what its steps made, and the stack
// of what undoes them.
type startup struct {
	ctx      context.Context
	cfg      *config.Config
	c        client.Client
	log      *zap.Logger
	m        *metrics.Metrics
	hq       string
	identity string

	closers []func()
	catalog *tasks.Catalog
	engine  *checkpoint.Engine
	ws      workspace.Workspace
	docker  *runtime.Docker
	pool    *gpu.Pool
	rec     *fleetRecord
	acts    *workflows.Set
	// host is this machine, as the set's activities see it.
	host *host.Host
}

func (s *startup) push(undo func()) { s.closers = append(s.closers, undo) }

func (s *startup) undo() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// checkNamespace refuses to poll a namespace runs cannot work in.
func (s *startup) checkNamespace() error {
	return CheckNamespace(s.ctx, s.c, s.cfg.Temporal.Namespace)
}

func (s *startup) loadCatalog() (err error) {
	s.catalog, err = tasks.Load(s.cfg.Tasks.Dir)
	return err
}

func (s *startup) openEngine() (err error) {
	s.engine, err = OpenEngine(s.ctx, s.cfg)
	return err
}

func (s *startup) lockWorkDir() error {
	lock, err := lockWorkDir(s.cfg.WorkDir())
	if err != nil {
		return err
	}
	s.push(func() { _ = lock.Close() })
	return nil
}

// checkHostFree runs before anything is reaped: the reaper takes what
// carries this host's id.
func (s *startup) checkHostFree() error {
	return checkHostFree(s.ctx, s.c, s.cfg, s.hq, s.identity)
}

func (s *startup) openWorkspace() error {
	ws, docker, err := openWorkspace(s.ctx, s.cfg, s.engine, s.cfg.Host.ID, s.cfg.Container.AgentImage, s.cfg.Container.EvalImage)
	if err != nil {
		return err
	}
	s.ws, s.docker = ws, docker
	if docker != nil {
		s.push(func() { _ = docker.Close() })
	}
	n, err := ws.Reap(s.ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		s.log.Warn("reaped agent processes left by an earlier worker", zap.Int("killed", n))
	}
	return nil
}

func (s *startup) openLeases() (err error) {
	cfg := s.cfg
	s.rec = newFleetRecord(s.engine.Store, hosts.Record{ID: cfg.Host.ID, Queue: s.hq, GPUType: cfg.Host.GPUType, Devices: cfg.Host.GPUDevices,
		Slots: cfg.Host.MaxAgents, Worker: s.identity, StartedAt: time.Now().UTC(), Source: "static"}, s.log.Named("fleet"))
	if job := os.Getenv("SLURM_JOB_ID"); job != "" {
		s.rec.rec.Source, s.rec.rec.SourceID = "slurm", job
	}
	s.rec.dedicated = cfg.Host.Dedicated
	s.pool, err = gpu.NewPool(gpu.Options{Slots: cfg.Host.MaxAgents, Devices: cfg.Host.GPUDevices, TTL: cfg.Host.LeaseTTL,
		File: filepath.Join(cfg.WorkDir(), "leases.json"), Changed: s.rec.touch,
		Torn: func(err error, aside string) {
			s.log.Warn("lease file unreadable: set aside, starting with no leases (their holders lease again)", zap.Error(err), zap.String("set_aside", aside))
		}})
	s.rec.pool = s.pool
	return err
}

func (s *startup) assemble() error {
	cfg := s.cfg
	egress, err := egressPolicy(s.ctx, cfg)
	if err != nil {
		return err
	}
	prices, err := llm.LoadPrices(cfg.Gateway.Prices)
	if err != nil {
		return err
	}
	// Kept by its hash beside the runs it costs: any of them can be
	// costed again, under it or another.
	if err := s.engine.Store.Put(s.ctx, keys.Prices(prices.Ref().SHA256), bytes.NewReader(prices.JSON())); err != nil {
		return fmt.Errorf("store the price table: %w", err)
	}
	gpuPrices, err := gpucost.Load(cfg.Cost.GPUPrices)
	if err != nil {
		return err
	}
	if err := s.engine.Store.Put(s.ctx, keys.GPUPrices(gpuPrices.SHA256()), bytes.NewReader(gpuPrices.JSON())); err != nil {
		return fmt.Errorf("store the GPU price table: %w", err)
	}
	here := &host.Host{HostID: cfg.Host.ID, HostQueue: s.hq, GPUType: cfg.Host.GPUType, GPUs: s.pool, WorkDir: cfg.WorkDir(), Observe: observeOptions(cfg)}
	log := s.log.Named("activities")
	data := &evaldata.Dir{Root: cfg.Eval.DataDir}
	sandbox := &workspace.Sandbox{Workspace: s.ws, WorkspaceLimit: int64(cfg.Agent.WorkspaceLimitGB * (1 << 30)), WorkspaceEntries: cfg.Agent.WorkspaceMaxEntries,
		LogLimit: cfg.Agent.LogLimitMB << 20, Egress: egress, Logger: log}
	llm := attempt.LLMGateway{Prices: prices, ServerTools: cfg.Gateway.ServerTools, AnthropicBeta: cfg.Gateway.AnthropicBeta, Bounds: gateway.Bounds{BodyTimeout: cfg.Gateway.BodyTimeout}, UsageEvery: cfg.Gateway.UsageEvery,
		MaxRefused: cfg.Gateway.MaxRefused, MaxRefusedBytes: cfg.Gateway.MaxRefusedMB << 20, MaxRecords: cfg.Gateway.MaxRecords, MaxConns: cfg.Gateway.MaxConnections,
		OpenAI:    gateway.Upstream{URL: cfg.Gateway.OpenAIURL, KeyName: cfg.Gateway.OpenAIKey},
		Anthropic: gateway.Upstream{URL: cfg.Gateway.AnthropicURL, KeyName: cfg.Gateway.AnthropicKey}}
	runs := host.Runs{Engine: s.engine, Keep: cfg.Checkpoint.Keep}
	s.host = here
	s.acts = &workflows.Set{
		Tasks:       &records.Tasks{Catalog: s.catalog, Store: s.engine.Store, Images: s.ws, Data: data},
		Records:     &records.Records{Catalog: s.catalog, Engine: s.engine, Client: s.c, MinExperiment: cfg.Observe.MinExperiment, GPUPrices: gpuPrices},
		Leases:      &host.Leases{Host: *here, Client: s.c},
		Fleet:       &records.Fleet{QueueOf: func(id string) string { return HostQueue(cfg.Temporal.TaskQueue, id) }},
		Attempts:    &attempt.Attempts{Sandbox: sandbox, ControlsEvery: cfg.Agent.ControlsEvery, EnvFile: cfg.Agent.EnvFile, SecretNames: cfg.Agent.SecretNames, LLM: llm, Host: here, Runs: runs, Client: s.c, Logger: log, Metrics: s.m, Rooms: &attach.Rooms{}},
		Evaluations: &evaluation.Evaluations{Sandbox: sandbox, Data: data, Host: here, Runs: runs, Client: s.c, Logger: log, Metrics: s.m},
	}
	return nil
}

func (s *startup) registerMetrics() error {
	cs := []metrics.Collector{metrics.GPUs(s.pool.Occupancy), metrics.GPUSamples(s.host.Observe.Latest.Fresh)}
	if s.cfg.Metrics.Fleet {
		cs = append(cs, fleetCounts(s.c, s.cfg.Temporal.Namespace))
	}
	for _, col := range cs {
		if err := s.m.Register(col); err != nil {
			return err
		}
		s.push(func() { s.m.Unregister(col) })
	}
	return nil
}

func (s *startup) openProvider() (err error) {
	if s.acts.Fleet.Provisioner, err = openProvider(s.ctx, s.cfg); err != nil {
		return err
	}
	s.acts.Fleet.ProvisionerKind = provisionKind(s.cfg.Provision.Kind)
	return nil
}

func (s *startup) sweep() error { return s.host.Sweep() }

// startRecord publishes this host to the store, and reaps provisioned
// hosts whose run ended; both stop after the SDK workers.
func (s *startup) startRecord() error {
	ctx, cancel := context.WithCancel(context.Background())
	go s.rec.run(ctx)
	reaped := make(chan struct{})
	if s.acts.Fleet.Provisioner != nil {
		go func() {
			defer close(reaped)
			reapJobs(ctx, s.acts.Fleet.Provisioner, s.c, s.cfg.Provision.ReapInterval, s.log.Named("reaper"))
		}()
	} else {
		close(reaped)
	}
	s.push(func() { cancel(); <-s.rec.done; <-reaped })
	return nil
}

func (s *startup) startHostWorker() error {
	w := worker.New(s.c, s.hq, worker.Options{
		Identity: s.identity,
		// A second guard behind the lease pool, with room for the lease
		// releases that share the queue.
		MaxConcurrentActivityExecutionSize: s.cfg.Host.MaxAgents + releaseSlots,
		// A stopping worker lets each agent activity stop its agent and
		// checkpoint it, so a restart (a deploy) costs no agent time.
		WorkerStopTimeout: s.cfg.Host.StopTimeout,
	})
	workflows.RegisterHost(w, s.acts)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on %s: %w", s.hq, err)
	}
	s.push(w.Stop)
	return nil
}

// startSharedWorker serves the shared queue, unless the host is dedicated
// (a job started for one attempt): then only its own queue, and nothing
// else may take its slot.
func (s *startup) startSharedWorker() error {
	if s.cfg.Host.Dedicated {
		return nil
	}
	w := worker.New(s.c, s.cfg.Temporal.TaskQueue, worker.Options{Identity: s.identity})
	workflows.RegisterShared(w, s.acts)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on %s: %w", s.cfg.Temporal.TaskQueue, err)
	}
	s.push(w.Stop)
	return nil
}

// startFence kills this host's containers of attempts no longer live.
func (s *startup) startFence() error {
	if s.docker == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.docker.Fence(ctx, s.cfg.Host.FenceInterval, staleTask(s.c), s.log.Named("fence"))
	}()
	s.push(func() { cancel(); <-done })
	return nil
}
