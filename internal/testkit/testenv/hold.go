// Hold: one engine on the machine shared by tests in several packages, taken in turns.

package testenv

import (
	"os"
	"path/filepath"
	"syscall"
)

// L is what Hold needs of a *testing.T.
type L interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Hold takes the machine-wide lock name until the test ends. `go test`
// runs packages as processes at once, so a mutex cannot keep two tests
// off the one Slurm cluster (two GPUs) when they are in different
// packages; an flock on a file can, within a process too (each Hold
// opens the file anew).
func Hold(t L, name string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "mlrb-test-"+name+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("lock %s: %v", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		t.Fatalf("lock %s: %v", name, err)
	}
	t.Cleanup(func() { _ = f.Close() })
}
