package checkpoint

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// FuzzRestoreManifest: any manifest (a tampered store, a crafted one) is
// restored inside its directory or refused; never a panic, never a file
// outside, never more memory than its files' sizes.
func FuzzRestoreManifest(f *testing.F) {
	for _, m := range []Manifest{
		{Version: 2, ChunkSize: 1 << 16, Files: []File{{Path: "a", Mode: os.ModeDir | 0o755}, {Path: "a/b.txt", Mode: 0o644}, {Path: "a/c", Mode: 0o644, HardLink: "a/b.txt"}, {Path: "l", Mode: os.ModeSymlink | 0o777, Link: "/etc"}}},
		{Version: 2, ChunkSize: 1 << 16, Files: []File{{Path: "l", Mode: os.ModeSymlink | 0o777, Link: ".."}, {Path: "l/x", Mode: 0o644}}},
		{Version: 2, ChunkSize: 1 << 16, Files: []File{{Path: "../x", Mode: 0o644}}},
		{Version: 3, ChunkSize: 1 << 16, Files: []File{{Path: "p", Mode: 0o644, Size: 5, Chunks: []string{strings.Repeat("ab", 32)}, Pack: strings.Repeat("cd", 32), PackOffset: 3}}},
	} {
		b, _ := json.Marshal(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m Manifest
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		for _, file := range m.Files {
			if file.Size > 1<<20 || file.Size < 0 {
				return // a restore allocates files at their size
			}
		}
		sandbox := t.TempDir()
		store, err := blob.NewFS(filepath.Join(sandbox, "store"))
		if err != nil {
			t.Fatal(err)
		}
		_ = New(store, Options{ChunkSize: 1 << 16}).Restore(context.Background(), &m, filepath.Join(sandbox, "in"))
		entries, err := os.ReadDir(sandbox)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "in" && e.Name() != "store" {
				t.Fatalf("the restore wrote %s outside its directory", e.Name())
			}
		}
	})
}
