package app

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/fleet/metrics"
	"github.com/mlrb/mlrb/internal/kit/ports"
)

// TestStartWorkerUndoesAFailedStep: a start that fails at any step
// leaves nothing held, so the same process starts again at once. Before,
// eight error paths returned with the work-dir lock still held (the next
// start refused: "work dir in use"), the Docker client open, the SDK
// workers and the metrics registered.
func TestStartWorkerUndoesAFailedStep(t *testing.T) {
	ctx := context.Background()
	port, err := ports.Reserve("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	port.Release() // the server binds it now; nothing else takes a port from this range
	cfg, err := config.Load("", nil, nil, map[string]string{"dev.state_dir": t.TempDir(), "dev.port": strconv.Itoa(port.Number), "dev.ui_port": "0",
		"host.id": "undo-test"})
	if err != nil {
		t.Fatal(err)
	}
	logger := zap.NewNop()
	srv, err := StartDevServer(ctx, cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cfg.Temporal.Address = srv.Address()
	m, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := dial(ctx, cfg, logger, m.SDK())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	injected := errors.New("injected")
	defer func() { failStep = nil }()
	for _, st := range (&startup{}).steps() {
		step := st.name
		failStep = func(s string) error {
			if s == step {
				return injected
			}
			return nil
		}
		if w, err := StartWorker(ctx, cfg, c, logger, m); !errors.Is(err, injected) {
			if w != nil {
				w.Stop()
			}
			t.Fatalf("failing after %q: %v", step, err)
		}
		failStep = nil
		w, err := StartWorker(ctx, cfg, c, logger, m)
		if err != nil {
			t.Fatalf("starting again after a failure at %q: %v", step, err)
		}
		w.Stop()
	}
}
