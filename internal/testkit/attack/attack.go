// Workspaces an attacker left, for the tests of whatever reads them: a tree beside a host secret, links planted in it.

// Package attack builds, for tests, what a hostile agent leaves behind:
// a workspace with a stand-in for the host's own files beside it, and
// symbolic links planted where the worker would follow them. Each test
// checks that the worker refuses them with a reason, without reading,
// following or mounting anything outside.
package attack

import (
	"os"
	"path/filepath"
	"testing"
)

// Workspace is a fresh workspace (root, with its output dir) and a
// directory standing for the host's own files (host, holding "secret").
func Workspace(t *testing.T) (root, host string) {
	t.Helper()
	root = t.TempDir()
	host = t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "secret"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "output"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root, host
}

// Symlink plants a link at at to target, making at's directory.
func Symlink(t *testing.T, target, at string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, at); err != nil {
		t.Fatal(err)
	}
}
