package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// TestSaveKeepsCheckpointsRestorable (audit H4, H2): a path longer than a
// restore can create and a tree deeper than a walk descends are left out
// of the checkpoint, which says so (incomplete, with the first reason);
// what is saved restores whole.
func TestSaveKeepsCheckpointsRestorable(t *testing.T) {
	for name, build := range map[string]func(ws string) (string, error){
		"long path": func(ws string) (string, error) {
			long := filepath.Join(ws, strings.Repeat(strings.Repeat("n", 255)+"/", 13))
			return "longer than a restore can create", os.MkdirAll(long, 0o755)
		},
		"deep tree": func(ws string) (string, error) {
			return "nest deeper than 512", os.MkdirAll(filepath.Join(ws, strings.Repeat("d/", 520)), 0o755)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.WriteFile(filepath.Join(ws, "model.bin"), []byte("weights"), 0o644); err != nil {
				t.Fatal(err)
			}
			want, err := build(ws)
			if err != nil {
				t.Fatal(err)
			}
			store, _ := blob.NewFS(t.TempDir())
			e := New(store, Options{})
			m, err := e.Save(context.Background(), ws, Meta{RunID: "r", Seq: 1, Attempt: 1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !m.Truncated || !strings.Contains(m.Incomplete, want) || len(m.Omitted) == 0 {
				t.Fatalf("manifest: truncated %v, incomplete %q, omitted %d", m.Truncated, m.Incomplete, len(m.Omitted))
			}
			for _, f := range m.Files {
				if len(f.Path) > MaxPathBytes || strings.Count(f.Path, "/") >= 512 {
					t.Fatalf("kept an entry a restore could not make: %.60s (%d bytes)", f.Path, len(f.Path))
				}
			}
			back, err := e.Load(context.Background(), "r", 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Restore(context.Background(), back, t.TempDir()); err != nil {
				t.Fatalf("restore: %v", err)
			}
		})
	}
}
