package logstore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// TestTail: the last n bytes of a log shipped in several segments, the
// segments before them never read; a short log comes back whole.
func TestTail(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "agent.log")
	s := &Shipper{Store: store, RunID: "r", Attempt: 1, Path: log}
	var all strings.Builder
	for i := 0; i < 5; i++ {
		line := strings.Repeat(string(rune('a'+i)), 99) + "\n"
		all.WriteString(line)
		if err := os.WriteFile(log, []byte(all.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := s.Ship(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	// The first segment is gone: a tail that needed it would fail.
	if err := store.Delete(ctx, prefix("r", 1)+"000000000000.log"); err != nil {
		t.Fatal(err)
	}
	got, cut, err := Tail(ctx, store, "r", 1, 150)
	if err != nil || !cut || string(got) != all.String()[500-150:] {
		t.Fatalf("tail %q, cut %v, %v", got, cut, err)
	}
	if got, cut, err := Tail(ctx, store, "r", 1, 400); err != nil || !cut || string(got) != all.String()[100:] {
		t.Fatalf("tail of the last four segments: %q, cut %v, %v", got, cut, err)
	}
}
