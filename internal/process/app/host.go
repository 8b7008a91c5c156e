// The process logger, the host's identity and the agent binary beside the worker.

// Package app wires a worker process: the embedded server of the dev
// default, the Temporal client, the engines and the SDK workers. Both the
// worker binary and `starter demo` use it.
package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/devserver"
	"github.com/mlrb/mlrb/internal/sandbox/gateway"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
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
	nameBuild()
	tuneGC()
	sas := map[string]enumspb.IndexedValueType{}
	for _, n := range workflows.SearchAttributeNames() {
		sas[n] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	// The server logs its own reconnects and shutdown as warnings; only errors matter here.
	srvLog := logger.Named("temporal").WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel))
	s, err := devserver.Start(ctx, devserver.Options{
		StateDir: cfg.StateDir("temporal"), Port: cfg.Dev.Port, UIPort: cfg.Dev.UIPort,
		Namespace: cfg.Temporal.Namespace, SearchAttributes: sas, Retention: DefaultRetention, Logger: srvLog,
	})
	if err != nil {
		return nil, err
	}
	// A state dir made by an older version lacks the newer attributes:
	// the setup a cluster gets adds them, once the frontend answers.
	if err := readyDevNamespace(ctx, s.Address(), cfg.Temporal.Namespace); err != nil {
		s.Stop()
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	return s, nil
}

// readyDevNamespace registers mlrb's missing search attributes on the
// embedded server, dialing until its frontend answers.
func readyDevNamespace(ctx context.Context, addr, ns string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := client.DialContext(ctx, client.Options{HostPort: addr, Namespace: ns, Logger: sdkLogger(zap.NewNop()),
			ConnectionOptions: client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}}})
		if err == nil {
			_, err = registerAttributes(ctx, c, ns)
			c.Close()
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dial own frontend: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Dial connects to the configured Temporal frontend, failing fast.
func Dial(ctx context.Context, cfg *config.Config, logger *zap.Logger) (client.Client, error) {
	return dial(ctx, cfg, logger, nil)
}

// dial connects with the SDK's metrics going to mh (nil: nowhere).
func dial(ctx context.Context, cfg *config.Config, logger *zap.Logger, mh client.MetricsHandler) (client.Client, error) {
	opts := client.Options{HostPort: cfg.Temporal.Address, Namespace: cfg.Temporal.Namespace, Logger: sdkLogger(logger), MetricsHandler: mh}
	tlsConf, err := cfg.Temporal.TLSConfig()
	if err != nil {
		return nil, err
	}
	opts.ConnectionOptions.TLS = tlsConf
	if !cfg.Temporal.Compresses() {
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if cfg.Temporal.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.Temporal.APIKey)
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.Temporal.ConnectTimeout)
	defer cancel()
	c, err := client.DialContext(dctx, opts)
	if err != nil {
		return nil, connectError(cfg.Temporal, err, dctx.Err())
	}
	return c, nil
}

// egressPolicy is where agents may connect through their door: the
// operator's gateway.allow, never this deployment's own endpoints nor this
// host's addresses.
func egressPolicy(ctx context.Context, cfg *config.Config) (*gateway.Policy, error) {
	ours, err := gateway.Ours(ctx, cfg.Temporal.Address, cfg.Storage.S3.Endpoint, cfg.Metrics.Listen, cfg.Host.IMDSEndpoint,
		cfg.Provision.EC2.Endpoint)
	if err != nil {
		return nil, err
	}
	return &gateway.Policy{Allow: cfg.Gateway.Allow, Deny: ours}, nil
}

// releaseSlots are host-queue slots beyond the agents, for lease releases.
const releaseSlots = 4

// openWorkspace assembles where attempts run, from host.runtime: the one
// place that knows whether it is Docker. Its containers carry hostID (what
// a restarted worker reaps); the images it needs must be on this host.
func openWorkspace(ctx context.Context, cfg *config.Config, engine *checkpoint.Engine, hostID string, need ...string) (workspace.Workspace, *runtime.Docker, error) {
	if cfg.Host.Runtime != config.RuntimeDocker {
		self, err := AgentBinary(cfg)
		if err != nil {
			return nil, nil, err
		}
		p, err := runtime.NewProcess(filepath.Join(cfg.WorkDir(), "procs"))
		if err != nil {
			return nil, nil, err
		}
		return &workspace.DirWorkspace{Process: p, Engine: engine, Self: self}, nil, nil
	}
	docker, err := runtime.NewDocker(ctx, hostID)
	if err != nil {
		return nil, nil, err
	}
	docker.DeviceFiles = cfg.Container.GPUs == config.GPUsDevices
	for _, img := range need {
		if _, err := docker.ImageDigest(ctx, img); err != nil {
			_ = docker.Close()
			return nil, nil, &config.Error{Msg: fmt.Sprintf("container image: %v", err)}
		}
	}
	c := cfg.Container
	return &workspace.ContainerWorkspace{Docker: docker, Engine: engine, BuiltinImage: c.AgentImage, EvalImage: c.EvalImage, Paths: c.Paths,
		Workdir: c.Workdir, Self: c.Self, MemoryBytes: c.MemoryMB << 20, CPUs: c.CPUs, PidsLimit: c.PidsLimit, User: containerUser(c.User)}, docker, nil
}

type zapSDK struct{ l *zap.SugaredLogger }

func sdkLogger(l *zap.Logger) sdklog.Logger {
	return zapSDK{l.Named("sdk").WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

func (z zapSDK) Debug(msg string, kv ...any) { z.l.Debugw(msg, kv...) }
func (z zapSDK) Info(msg string, kv ...any)  { z.l.Infow(msg, kv...) }
func (z zapSDK) Warn(msg string, kv ...any)  { z.l.Warnw(msg, kv...) }
func (z zapSDK) Error(msg string, kv ...any) { z.l.Errorw(msg, kv...) }

// AgentBinaryName is the small binary (cmd/mlrb-agent) that the process
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
	if sib, ok := Sibling(AgentBinaryName); ok {
		return sib, nil
	}
	return self, nil
}

// Sibling is the first of names that is an executable beside this
// binary, as `task build` lays the binaries out.
func Sibling(names ...string) (string, bool) {
	self, err := os.Executable()
	if err != nil {
		return "", false
	}
	for _, n := range names {
		if p := filepath.Join(filepath.Dir(self), n); executable(p) {
			return p, true
		}
	}
	return "", false
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// containerUser is the user containers run as ("": the image's own).
func containerUser(u string) string {
	if u == config.UserImage {
		return ""
	}
	return u
}
