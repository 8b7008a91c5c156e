// The missing-tool rule: skip here, fail under CI=1.

// Package testenv is what a test does when a real engine or tool it needs
// is missing: it skips on a laptop, and fails when CI is set (as .ci/run
// sets it), so that CI never passes by skipping.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
)

// T is what testenv needs of a *testing.T (or a command's stand-in).
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	Skip(args ...any)
}

// Missing skips the test, or fails it under CI.
func Missing(t T, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; CI is set, so this is a failure", what)
		return
	}
	t.Skip(what)
}

// Tool finds a program on PATH or in GOPATH/bin (where `go install` puts
// it); without it the test is Missing, naming how to install it.
func Tool(t T, name, install string) string {
	t.Helper()
	if p := Find(name); p != "" {
		return p
	}
	Missing(t, name+" is not installed ("+install+")")
	return ""
}

// Find is the path of a program on PATH or in GOPATH/bin, or "".
func Find(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if h, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(h, "go")
		}
	}
	p := filepath.Join(gopath, "bin", name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}
