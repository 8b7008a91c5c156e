package devserver

import (
	"os"
	"runtime/debug"
	"testing"
)

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestTuneGC: the embedding process runs at GCPercent, unless GOGC is set.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(gcPercent())
	t.Setenv("GOGC", "")
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	debug.SetGCPercent(100)
	tuneGC()
	if p := gcPercent(); p != GCPercent {
		t.Fatalf("GOGC unset: GC percent %d, want %d", p, GCPercent)
	}
	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	tuneGC()
	if p := gcPercent(); p != 50 {
		t.Fatalf("GOGC=50: GC percent %d, want 50 kept", p)
	}
}
