// Stack is what one process hosts.

package app

import (
	"context"
	"maps"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/fleet/metrics"
	"github.com/mlrb/mlrb/internal/process/devserver"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/workflows"
)

// Stack is what one process hosts: optionally the embedded server, and
// optionally a client with a worker.
type Stack struct {
	Server *devserver.Server // nil without dev
	Client client.Client     // nil without a worker
	Worker *Worker
	// stopMetrics closes the metrics endpoint (nil: none).
	stopMetrics func()
}

// StartStack starts the embedded server when dev is set (and points cfg at
// it), then a client and a worker unless serverOnly.
func StartStack(ctx context.Context, cfg *config.Config, logger *zap.Logger, dev, serverOnly bool) (*Stack, error) {
	s := &Stack{}
	if dev {
		srv, err := StartDevServer(ctx, cfg, logger)
		if err != nil {
			return nil, err
		}
		s.Server = srv
		Embedded(cfg, srv.Address())
	}
	if serverOnly {
		return s, nil
	}
	var m *metrics.Metrics
	if cfg.Metrics.Listen != "" {
		var err error
		if m, err = metrics.New(); err != nil {
			s.Stop()
			return nil, err
		}
		if s.stopMetrics, err = m.Serve(cfg.Metrics.Listen, logger.Named("metrics")); err != nil {
			s.Stop()
			return nil, err
		}
	}
	c, err := dial(ctx, cfg, logger, m.SDK())
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.Client = c
	w, err := StartWorker(ctx, cfg, c, logger, m)
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.Worker = w
	return s, nil
}

// Embedded points cfg's Temporal client at an embedded server on
// address: plain loopback gRPC, whatever TLS and API key the config names
// for a cluster (a `--dev` worker beside a production config dials its
// own server, never the cluster's way).
func Embedded(cfg *config.Config, address string) {
	cfg.Temporal.Address, cfg.Temporal.APIKey, cfg.Temporal.TLS = address, "", config.TemporalTLS{}
}

// Stop stops the worker, then the client, then the server.
func (s *Stack) Stop() {
	if s.Worker != nil {
		s.Worker.Stop()
	}
	if s.Client != nil {
		s.Client.Close()
	}
	if s.stopMetrics != nil {
		s.stopMetrics()
	}
	if s.Server != nil {
		s.Server.Stop()
	}
}

// provisionKind is the policy's name of a provision.kind: static is the
// empty default, so that runs without provisioning keep their input.
func provisionKind(k config.ProvisionKind) string {
	if k == config.ProvisionStatic {
		return ""
	}
	return string(k)
}

// Policy is the run policy the config asks for; the starter puts it into
// each run's input so that it replays identically.
func Policy(cfg *config.Config) workflows.Policy {
	p := workflows.Policy{
		CheckpointInterval: cfg.Checkpoint.Interval,
		HeartbeatTimeout:   cfg.Agent.HeartbeatTimeout,
		Grace:              cfg.Agent.Grace,
		MaxInfraAttempts:   cfg.Agent.MaxInfraAttempts,
		EvalAttempts:       cfg.Eval.Attempts,
		LeaseTimeout:       cfg.Agent.LeaseTimeout,

		CheckpointAlertAfter: cfg.Checkpoint.AlertAfter,
		EvalWaitLimit:        cfg.Eval.WaitLimit,
		Provision:            provisionKind(cfg.Provision.Kind),
		ProvisionMargin:      cfg.Provision.Margin,
		BootTimeout:          cfg.Provision.BootTimeout,
		ReleaseAfter:         cfg.Human.ReleaseAfter,
		PersonWaitLimit:      cfg.Human.WaitLimit,
	}
	// Validated with the config.
	p.Curve, p.NoCurve, _ = cfg.Eval.CurveMarks()
	return p
}

// observeOptions is how this host samples agents' processes and GPUs.
func observeOptions(cfg *config.Config) observe.Options {
	// A device's last sample is exported until two samples were missed.
	o := observe.Options{ProcInterval: cfg.Observe.ProcInterval, GPUInterval: cfg.Observe.GPUInterval, Latest: observe.NewLatest(2*cfg.Observe.GPUInterval + time.Second)}
	if len(cfg.Observe.GPUCommand) > 0 {
		o.GPU = &observe.GPUQuery{Command: cfg.Observe.GPUCommand}
	}
	return o
}

// StartRun starts a run of in as workflow id on queue: its memo the
// task, agent and seed and what extra adds, its search attributes the
// run's.
func StartRun(ctx context.Context, c client.Client, queue, id string, in workflows.RunInput, extra map[string]any) (client.WorkflowRun, error) {
	memo := map[string]any{"task": in.Task, "agent": in.Agent, "seed": in.Seed}
	maps.Copy(memo, extra)
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue, Memo: memo,
		TypedSearchAttributes: workflows.RunSearchAttributes(in)}, workflows.RunWorkflowName, in)
}
