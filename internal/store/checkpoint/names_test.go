package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// TestNamesThatAreNotUTF8 (audit N8): two files whose names differ only in
// bytes that are not UTF-8 (w\xff, w\xfe), a symlink to one and a hard
// link to the other, come back byte for byte through a stored manifest:
// none collides with another as U+FFFD, none is lost.
func TestNamesThatAreNotUTF8(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	for name, body := range map[string]string{"w\xff": "first", "w\xfe": "second", "plain": "third"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("w\xff", filepath.Join(src, "to-\xff")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(src, "w\xfe"), filepath.Join(src, "hard-\xfe")); err != nil {
		t.Fatal(err)
	}
	e := New(store, Options{ChunkSize: 1 << 20})
	if _, err := e.Save(ctx, src, Meta{RunID: "names", Seq: 1}, nil); err != nil {
		t.Fatal(err)
	}
	// Read back from the store, as a restore on another host does.
	m, err := New(store, Options{ChunkSize: 1 << 20}).Load(ctx, "names", 1)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if err := e.Restore(ctx, m, dst); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"w\xff": "first", "w\xfe": "second", "plain": "third", "to-\xff": "first", "hard-\xfe": "second"} {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != want {
			t.Errorf("%q: %q, %v; want %q", name, got, err, want)
		}
	}
	if target, err := os.Readlink(filepath.Join(dst, "to-\xff")); err != nil || target != "w\xff" {
		t.Errorf("link: %q, %v", target, err)
	}
	entries, _ := os.ReadDir(dst)
	if len(entries) != 5 {
		t.Errorf("restored %d entries, want 5", len(entries))
	}
}

// TestManifestEntriesBounded (audit N3): whatever a workspace holds (a
// burst of links between two measurements of it), a manifest lists at
// most the engine's MaxEntries, and says it is truncated.
func TestManifestEntriesBounded(t *testing.T) {
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := os.Link(filepath.Join(src, "f"), filepath.Join(src, "l"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	e := New(store, Options{MaxEntries: 8})
	m, err := e.Save(context.Background(), src, Meta{RunID: "bomb", Seq: 1}, nil)
	if err != nil || len(m.Files) != 8 || !m.Truncated {
		t.Fatalf("manifest of 51 entries under a bound of 8: %d files, truncated %v, %v", len(m.Files), m != nil && m.Truncated, err)
	}
	if m, err = New(store, Options{}).Save(context.Background(), src, Meta{RunID: "bomb", Seq: 2}, nil); err != nil || len(m.Files) != 51 || m.Truncated {
		t.Fatalf("unbounded: %d files, %v", len(m.Files), err)
	}
}
