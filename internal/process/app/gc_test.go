package app

import (
	"os"
	"runtime/debug"
	"testing"
)

func currentGCPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestTuneGC: a process embedding the dev server runs at gcPercent, unless GOGC is set.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(currentGCPercent())
	t.Setenv("GOGC", "")
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	debug.SetGCPercent(100)
	tuneGC()
	if p := currentGCPercent(); p != gcPercent {
		t.Fatalf("GOGC unset: GC percent %d, want %d", p, gcPercent)
	}
	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	tuneGC()
	if p := currentGCPercent(); p != 50 {
		t.Fatalf("GOGC=50: GC percent %d, want 50 kept", p)
	}
}
