// The work dir's lock: one worker per work dir.

package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mlrb/mlrb/config"
)

// lockWorkDir takes the work dir for this worker: two workers on one dir
// would sweep and reap each other's agents.
func lockWorkDir(dir string) (*os.File, error) {
	// The worker's alone: workspaces between checkpoints and running
	// evaluations' results live below, owned to container.user; no other
	// account of the host may reach them (containers get them by bind
	// mounts, which the daemon resolves).
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("host.work_dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("host.work_dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "worker.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("host.work_dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &config.Error{Msg: fmt.Sprintf("host.work_dir: %s is in use by another worker; give each worker its own host.work_dir and host.id", dir)}
		}
		return nil, fmt.Errorf("host.work_dir: lock: %w", err)
	}
	return f, nil
}
