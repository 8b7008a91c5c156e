// The worker certify runs its scenarios on.

package certify

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/fleet/hosts"
	"github.com/mlrb/mlrb/internal/kit/ports"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// worker is the worker certify runs its scenarios on: a child process
// with its own embedded server, so that the crash scenario can SIGKILL
// it as a host's death would, and start it again on the same state.
type worker struct {
	// hostID is the child's host, whose record in store goes with it.
	hostID string
	store  blob.Store
	bin    string
	env    []string
	state  string
	port   *ports.Port
	logf   *os.File
	cmd    *exec.Cmd
}

// newWorker prepares the child: its own state dir and port; the store,
// the runtime, the images and the gateway are the operator's (the
// environment and config file it inherits), so what it records lands
// where `starter` reads.
func newWorker(bin string, cfg *config.Config, hostID string, store blob.Store) (*worker, error) {
	state, err := os.MkdirTemp("", "mlrb-certify-")
	if err != nil {
		return nil, fmt.Errorf("certify's state dir: %w", err)
	}
	p, err := ports.Reserve("127.0.0.1")
	if err != nil {
		return nil, fmt.Errorf("certify's port: %w", err)
	}
	w := &worker{hostID: hostID, store: store, bin: bin, state: state, port: p}
	w.env = append(os.Environ(),
		"MLRB_DEV_STATE_DIR="+state, "MLRB_DEV_PORT="+strconv.Itoa(p.Number), "MLRB_DEV_UI_PORT=0",
		"MLRB_TEMPORAL_ADDRESS="+w.address(), "MLRB_HOST_ID="+hostID, "MLRB_EVAL_CURVE=off",
		// The extension comes seconds before a short run's SIGTERM.
		"MLRB_AGENT_CONTROLS_EVERY="+controlsEvery.String())
	if cfg.Storage.Kind == config.StorageFS {
		w.env = append(w.env, "MLRB_STORAGE_FS_ROOT="+cfg.BlobRoot())
	}
	if cfg.Host.WorkDir == "" {
		w.env = append(w.env, "MLRB_HOST_WORK_DIR="+filepath.Join(state, "work"))
	}
	return w, nil
}

func (w *worker) address() string { return "127.0.0.1:" + strconv.Itoa(w.port.Number) }

// start starts the child, its log appended to worker.log in its state.
func (w *worker) start() error {
	f, err := os.OpenFile(filepath.Join(w.state, "worker.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("certify's worker log: %w", err)
	}
	cmd := exec.Command(w.bin, "--dev")
	cmd.Env, cmd.Stdout, cmd.Stderr = w.env, f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start the worker %s: %w", w.bin, err)
	}
	w.cmd, w.logf = cmd, f
	return nil
}

// kill is the crash: SIGKILL, as a host's death; its agent dies with it.
func (w *worker) kill() {
	if w.cmd != nil {
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		_ = w.cmd.Wait()
		_ = w.logf.Close()
		w.cmd = nil
	}
}

// stop ends the child gracefully and removes its state, and its host's
// record: a host that lived for one certification would only pile up in
// `starter hosts`.
func (w *worker) stop() {
	if w.cmd != nil {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = w.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = w.cmd.Process.Kill()
			<-done
		}
		_ = w.logf.Close()
		w.cmd = nil
	}
	w.port.Release()
	_ = os.RemoveAll(w.state)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = hosts.Delete(ctx, w.store, w.hostID)
}

// dial connects to the child's server once it serves (a cold embedded
// server takes seconds).
func (w *worker) dial(ctx context.Context, cfg config.Config) (client.Client, error) {
	app.Embedded(&cfg, w.address())
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := app.Dial(ctx, &cfg, zap.NewNop())
		if err == nil {
			if err = app.CheckNamespace(ctx, c, cfg.Temporal.Namespace); err == nil {
				return c, nil
			}
			c.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("certify's worker never served (its log: %s): %w", filepath.Join(w.state, "worker.log"), err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// logTail is the end of the child's log, for a failure's message.
func (w *worker) logTail() string {
	b, _ := os.ReadFile(filepath.Join(w.state, "worker.log"))
	return string(b[max(0, len(b)-3000):])
}
