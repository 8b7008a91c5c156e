package checkpoint

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// Only restores one directory of a checkpoint and nothing else: the
// control model's, never its run's whole workspace (audit M3). A hard
// link in it to a file outside comes back as that file's bytes.
func TestOnlyRestoresOneDirectory(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src)
	model := filepath.Join(src, "a", "b", "model")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(model, "config.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// a/0.bin is walked first: the model's weights are the link.
	if err := os.Link(filepath.Join(src, "a", "weights.bin"), filepath.Join(src, "a", "0.bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(src, "a", "weights.bin"), filepath.Join(model, "weights.bin")); err != nil {
		t.Fatal(err)
	}
	e := New(store, Options{ChunkSize: 1 << 20})
	m, err := e.Save(ctx, src, Meta{RunID: "run/only", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Only("nowhere") != nil {
		t.Fatal("a path the checkpoint lacks gave a manifest")
	}
	for _, f := range m.Files {
		if f.Path == "a/b/model/weights.bin" && f.HardLink == "" {
			t.Fatal("the model's weights were saved as the file, not as the link this test needs")
		}
	}
	sub := m.Only("a/b/model")
	want, _ := os.ReadFile(filepath.Join(src, "a", "weights.bin"))
	if sub.Bytes != int64(len(want))+2 {
		t.Fatalf("narrowed to %d bytes, want %d", sub.Bytes, len(want)+2)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if err := e.Restore(ctx, sub, dst); err != nil {
		t.Fatal(err)
	}
	got := treeDigest(t, dst)
	for _, p := range []string{"a/b/model/config.json", "a/b/model/weights.bin", "a/b/model", "a/b", "a"} {
		if got[p] == "" {
			t.Errorf("%s not restored", p)
		}
	}
	if len(got) != 6 { // ".", a, a/b, the model dir and its two files
		t.Errorf("restored %d entries, want 6: %v", len(got), got)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "a", "b", "model", "weights.bin")); !bytes.Equal(b, want) {
		t.Error("the linked weights are not the file they linked to")
	}
}

// ReadFile reads a small file of a checkpoint from its verified chunks,
// through a hard link too, and refuses one over its limit or not there.
func TestReadFileFromChunks(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src)
	if err := os.Link(filepath.Join(src, "run.sh"), filepath.Join(src, "zz-link")); err != nil {
		t.Fatal(err)
	}
	e := New(store, Options{ChunkSize: 1 << 20})
	m, err := e.Save(ctx, src, Meta{RunID: "run/read", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(src, "run.sh"))
	for _, rel := range []string{"run.sh", "zz-link"} {
		if got, err := e.ReadFile(ctx, m, rel, 1<<10); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %q, %v", rel, got, err)
		}
	}
	if _, err := e.ReadFile(ctx, m, "a/weights.bin", 1<<10); err == nil {
		t.Fatal("a file over the limit was read")
	}
	if _, err := e.ReadFile(ctx, m, "nowhere", 1<<10); err == nil {
		t.Fatal("a file not in the checkpoint was read")
	}
}
