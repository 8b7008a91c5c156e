// Package app wires a worker process: the embedded server of the dev
// default, the Temporal client, the engines and the SDK workers. Both the
// worker binary and `starter demo` use it.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/checkpoint"
	"github.com/mlrb/mlrb/internal/devserver"
	"github.com/mlrb/mlrb/internal/gpu"
	"github.com/mlrb/mlrb/internal/hosts"
	"github.com/mlrb/mlrb/internal/metrics"
	"github.com/mlrb/mlrb/internal/provision"
	"github.com/mlrb/mlrb/internal/runtime"
	"github.com/mlrb/mlrb/tasks"
	"github.com/mlrb/mlrb/workflows"
)

// NewLogger builds the process logger at the configured level.
func NewLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Encoding = "console"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	zc.Sampling = nil
	return zc.Build()
}

// StartDevServer starts the embedded Temporal server and Web UI on the
// configured ports with the run search attributes registered.
func StartDevServer(ctx context.Context, cfg *config.Config, logger *zap.Logger) (*devserver.Server, error) {
	sas := map[string]enumspb.IndexedValueType{}
	for _, n := range workflows.SearchAttributeNames() {
		sas[n] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	// The server logs its own reconnects and shutdown as warnings; only errors matter here.
	srvLog := logger.Named("temporal").WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel))
	s, err := devserver.Start(ctx, devserver.Options{
		StateDir: cfg.StateDir("temporal"), Port: cfg.Dev.Port, UIPort: cfg.Dev.UIPort,
		Namespace: cfg.Temporal.Namespace, SearchAttributes: sas, Logger: srvLog,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ConnectError says the Temporal server could not be reached.
type ConnectError struct {
	Address string
	Err     error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("cannot reach Temporal at %s (temporal.address, MLRB_TEMPORAL_ADDRESS): %v; start one with `worker --dev` or point temporal.address at your cluster", e.Address, e.Err)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// Dial connects to the configured Temporal frontend, failing fast.
func Dial(ctx context.Context, cfg *config.Config, logger *zap.Logger) (client.Client, error) {
	return dial(ctx, cfg, logger, nil)
}

// dial connects with the SDK's metrics going to mh (nil: nowhere).
func dial(ctx context.Context, cfg *config.Config, logger *zap.Logger, mh client.MetricsHandler) (client.Client, error) {
	opts := client.Options{HostPort: cfg.Temporal.Address, Namespace: cfg.Temporal.Namespace, Logger: sdkLogger(logger), MetricsHandler: mh}
	if cfg.Temporal.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.Temporal.APIKey)
		opts.ConnectionOptions.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.Temporal.ConnectTimeout)
	defer cancel()
	c, err := client.DialContext(dctx, opts)
	if err != nil {
		if errors.Is(dctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", cfg.Temporal.ConnectTimeout)
		}
		return nil, &ConnectError{Address: cfg.Temporal.Address, Err: err}
	}
	return c, nil
}

// Worker is a running worker: one SDK worker on the shared queue
// (workflows, task resolution, leases, evaluation) and one on this host's
// queue (agents pinned to the host that holds their lease).
type Worker struct {
	shared, host worker.Worker
	HostQueue    string
	stopFence    context.CancelFunc
	stopRegister func()
	lock         *os.File
}

// HostQueue names a host's task queue.
func HostQueue(base, hostID string) string { return base + "-host-" + hostID }

// StartWorker reaps what an earlier worker on this host left running, then
// starts polling.
func StartWorker(ctx context.Context, cfg *config.Config, c client.Client, logger *zap.Logger, m *metrics.Metrics) (*Worker, error) {
	catalog, err := tasks.Load(cfg.Tasks.Dir)
	if err != nil {
		return nil, err
	}
	engine, err := OpenEngine(ctx, cfg)
	if err != nil {
		return nil, err
	}
	lock, err := lockWorkDir(cfg.WorkDir())
	if err != nil {
		return nil, err
	}
	// Before anything is reaped: the reaper takes what carries this
	// host's id.
	hq := HostQueue(cfg.Temporal.TaskQueue, cfg.Host.ID)
	identity := hosts.Identity(cfg.Host.ID, cfg.WorkDir())
	if err := checkHostFree(ctx, c, cfg, hq, identity); err != nil {
		_ = lock.Close()
		return nil, err
	}
	ws, docker, err := openWorkspace(ctx, cfg, engine)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	n, err := ws.Reap(ctx)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		logger.Warn("reaped agent processes left by an earlier worker", zap.Int("killed", n))
	}
	reg := newRegister(engine.Store, hosts.Record{ID: cfg.Host.ID, Queue: hq, GPUType: cfg.Host.GPUType, Devices: cfg.Host.GPUDevices,
		Slots: cfg.Host.MaxAgents, Worker: identity, StartedAt: time.Now().UTC(), Provider: "static"}, logger.Named("register"))
	if job := os.Getenv("SLURM_JOB_ID"); job != "" {
		reg.rec.Provider, reg.rec.ProviderID = "slurm", job
	}
	pool, err := gpu.NewPool(gpu.Options{Slots: cfg.Host.MaxAgents, Devices: cfg.Host.GPUDevices, TTL: cfg.Host.LeaseTTL,
		File: filepath.Join(cfg.WorkDir(), "leases.json"), Changed: reg.touch})
	if err != nil {
		return nil, err
	}
	reg.pool = pool
	acts := &activities.Activities{
		Catalog: catalog, Engine: engine, Workspace: ws, Client: c, Keep: cfg.Checkpoint.Keep,
		HostID: cfg.Host.ID, HostQueue: hq, GPUType: cfg.Host.GPUType, GPUs: pool,
		WorkDir: cfg.WorkDir(), Logger: logger.Named("activities"), EnvFile: cfg.Agent.EnvFile,
		WorkspaceLimit: int64(cfg.Agent.WorkspaceLimitGB * (1 << 30)),
		QueueOf:        func(id string) string { return HostQueue(cfg.Temporal.TaskQueue, id) },
		Metrics:        m,
	}
	if err := m.Register(metrics.GPUs(pool.Usage)); err != nil {
		return nil, err
	}
	if cfg.Metrics.Fleet {
		if err := m.Register(fleetCounts(c, cfg.Temporal.Namespace)); err != nil {
			return nil, err
		}
	}
	if acts.Provider, err = openProvider(ctx, cfg); err != nil {
		return nil, err
	}
	acts.ProviderKind = provisionKind(cfg.Provision.Kind)
	if err := acts.Sweep(); err != nil {
		return nil, err
	}
	// A dedicated host (a job started for one attempt) serves only its
	// own queue: nothing else may take its slot.
	var shared worker.Worker
	if !cfg.Host.Dedicated {
		shared = worker.New(c, cfg.Temporal.TaskQueue, worker.Options{Identity: identity})
		workflows.RegisterShared(shared, acts)
	}
	hostW := worker.New(c, hq, worker.Options{
		Identity: identity,
		// A second guard behind the lease pool, with room for the lease
		// releases that share the queue.
		MaxConcurrentActivityExecutionSize: cfg.Host.MaxAgents + releaseSlots,
		// A stopping worker lets each agent activity stop its agent and
		// checkpoint it, so a restart (a deploy) costs no agent time.
		WorkerStopTimeout: cfg.Host.StopTimeout,
	})
	workflows.RegisterHost(hostW, acts)
	if shared != nil {
		if err := shared.Start(); err != nil {
			return nil, fmt.Errorf("start worker on %s: %w", cfg.Temporal.TaskQueue, err)
		}
	}
	if err := hostW.Start(); err != nil {
		if shared != nil {
			shared.Stop()
		}
		return nil, fmt.Errorf("start worker on %s: %w", hq, err)
	}
	rctx, stopReg := context.WithCancel(context.Background())
	go reg.run(rctx)
	if acts.Provider != nil {
		go reapJobs(rctx, acts.Provider, c, cfg.Provision.ReapInterval, logger.Named("reaper"))
	}
	w := &Worker{shared: shared, host: hostW, HostQueue: hq, stopFence: func() {}, lock: lock,
		stopRegister: func() { stopReg(); <-reg.done }}
	if docker != nil {
		fctx, cancel := context.WithCancel(context.Background())
		w.stopFence = cancel
		go docker.Fence(fctx, cfg.Host.FenceInterval, staleTask(c), logger.Named("fence"))
	}
	return w, nil
}

// slurmProvisioner submits jobs that run this worker's own binary, unless
// provision.slurm.worker names another command.
func slurmProvisioner(cfg *config.Config) (*provision.Slurm, error) {
	cmd := cfg.Provision.Slurm.Worker
	if len(cmd) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("provision.slurm.worker: find own binary: %w", err)
		}
		cmd = []string{self}
	}
	dir := cfg.SlurmWorkDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("provision.slurm.work_dir: %w", err)
	}
	return &provision.Slurm{Worker: cmd, Partition: cfg.Provision.Slurm.Partition, WorkDir: dir}, nil
}

// releaseSlots are host-queue slots beyond the agents, for lease releases.
const releaseSlots = 4

// openWorkspace assembles where attempts run, from host.runtime: the one
// place that knows whether it is Docker.
func openWorkspace(ctx context.Context, cfg *config.Config, engine *checkpoint.Engine) (activities.Workspace, *runtime.Docker, error) {
	if cfg.Host.Runtime != "docker" {
		self, err := AgentBinary(cfg)
		if err != nil {
			return nil, nil, err
		}
		p, err := runtime.NewProcess(filepath.Join(cfg.WorkDir(), "procs"))
		if err != nil {
			return nil, nil, err
		}
		return &activities.DirWorkspace{Process: p, Engine: engine, Self: self}, nil, nil
	}
	docker, err := runtime.NewDocker(ctx, cfg.Host.ID)
	if err != nil {
		return nil, nil, err
	}
	for _, img := range []string{cfg.Container.AgentImage, cfg.Container.EvalImage} {
		if _, err := docker.ImageDigest(ctx, img); err != nil {
			return nil, nil, &config.Error{Msg: fmt.Sprintf("container image: %v", err)}
		}
	}
	c := cfg.Container
	return &activities.ContainerWorkspace{Docker: docker, Engine: engine, AgentImage: c.AgentImage, EvalImage: c.EvalImage, Paths: c.Paths,
		Workdir: c.Workdir, Self: c.Self, MemoryBytes: c.MemoryMB << 20, CPUs: c.CPUs, PidsLimit: c.PidsLimit, User: c.User}, docker, nil
}

// Stop stops polling; running agents are stopped and checkpointed (within
// host.stop_timeout), and their attempts handed back to their runs. The
// shared queue stops first: a workflow task this worker took up while
// stopping would sit until its timeout instead of going to a live worker.
func (w *Worker) Stop() {
	w.stopFence()
	if w.shared != nil {
		w.shared.Stop()
	}
	w.host.Stop()
	w.stopRegister()
	_ = w.lock.Close()
}

type zapSDK struct{ l *zap.SugaredLogger }

func sdkLogger(l *zap.Logger) sdklog.Logger {
	return zapSDK{l.Named("sdk").WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

func (z zapSDK) Debug(msg string, kv ...any) { z.l.Debugw(msg, kv...) }
func (z zapSDK) Info(msg string, kv ...any)  { z.l.Infow(msg, kv...) }
func (z zapSDK) Warn(msg string, kv ...any)  { z.l.Warnw(msg, kv...) }
func (z zapSDK) Error(msg string, kv ...any) { z.l.Errorw(msg, kv...) }

// AgentBinaryName is the small binary (deploy/agent) that the process
// runtime prefers, beside the worker's, for the built-in agents and the
// reference evaluator.
const AgentBinaryName = "mlrb-agent"

// AgentBinary is the binary the process runtime runs the built-in agents
// and the reference evaluator with: host.agent_binary, else mlrb-agent
// beside this binary, else this binary. This one embeds the Temporal
// server, whose package initialisation costs each start about 30 ms of
// CPU: at a benchmark's rate of short runs, more than the orchestration.
func AgentBinary(cfg *config.Config) (string, error) {
	if p := cfg.Host.AgentBinary; p != "" {
		if !executable(p) {
			return "", &config.Error{Msg: fmt.Sprintf("host.agent_binary: %s is not an executable file (build it with `task build`, or unset the key to use this binary)", p)}
		}
		return filepath.Abs(p)
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own binary: %w", err)
	}
	if sib := filepath.Join(filepath.Dir(self), AgentBinaryName); executable(sib) {
		return sib, nil
	}
	return self, nil
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
