package checkpoint

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
)

func writeTree(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "empty-dir"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "a/b/c/deep.txt"), []byte("deep"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644))
	must(os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	big := make([]byte, 3<<20+17)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(r.IntN(256))
	}
	must(os.WriteFile(filepath.Join(dir, "a/weights.bin"), big, 0o644))
	must(os.Symlink("a/weights.bin", filepath.Join(dir, "latest")))
}

func treeDigest(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, _ := d.Info()
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link:" + l
		case info.IsDir():
			out[rel] = fmt.Sprintf("dir %v", info.Mode().Perm())
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("%x %v", sha256.Sum256(b), info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRoundTripAndDedup(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src)
	e := New(store, Options{ChunkSize: 1 << 20})
	m1, err := e.Save(ctx, src, Meta{RunID: "run/a", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m1.NewChunks < 4 {
		t.Fatalf("first checkpoint stored %d chunks, want at least 4", m1.NewChunks)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if err := e.Restore(ctx, m1, dst); err != nil {
		t.Fatal(err)
	}
	want, got := treeDigest(t, src), treeDigest(t, dst)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: restored %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("restored %d entries, want %d", len(got), len(want))
	}

	// Same tree under another run, through a fresh engine: nothing new stored.
	m2, err := New(store, Options{ChunkSize: 1 << 20}).Save(ctx, src, Meta{RunID: "run/b", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m2.NewChunks != 0 || m2.NewBytes != 0 {
		t.Fatalf("second run stored %d chunks (%d bytes), want 0", m2.NewChunks, m2.NewBytes)
	}

	// One small change: only that file's chunk is new.
	if err := os.WriteFile(filepath.Join(src, "a/b/c/deep.txt"), []byte("deeper"), 0o644); err != nil {
		t.Fatal(err)
	}
	m3, err := e.Save(ctx, src, Meta{RunID: "run/a", Seq: 2}, m1)
	if err != nil {
		t.Fatal(err)
	}
	if m3.NewChunks != 1 || m3.NewBytes != 6 {
		t.Fatalf("incremental stored %d chunks, %d bytes; want 1 chunk of 6 bytes", m3.NewChunks, m3.NewBytes)
	}
	list, err := e.List(ctx, "run/a")
	if err != nil || len(list) != 2 || list[1].Seq != 2 {
		t.Fatalf("List = %v, %v", list, err)
	}
}

func TestRestoreDetectsCorruptChunk(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	store, _ := blob.NewFS(root)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("hello world"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := New(store, Options{ChunkSize: 1 << 20})
	m, err := e.Save(ctx, src, Meta{RunID: "r", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Files[0].Stored()[0]
	if err := os.WriteFile(filepath.Join(root, "chunks", h[:2], h), encoder.EncodeAll([]byte("hello w0rld"), nil), 0o644); err != nil {
		t.Fatal(err)
	}
	err = e.Restore(ctx, m, t.TempDir())
	var ce *CorruptChunkError
	if !errors.As(err, &ce) || ce.Hash != h {
		t.Fatalf("Restore error = %v, want a CorruptChunkError naming %s", err, h)
	}
	if err := os.Remove(filepath.Join(root, "chunks", h[:2], h)); err != nil {
		t.Fatal(err)
	}
	if err := e.Restore(ctx, m, t.TempDir()); !errors.As(err, &ce) || ce.Reason != "missing" {
		t.Fatalf("Restore error = %v, want a missing chunk", err)
	}
}

func TestManifestIsTheCommit(t *testing.T) {
	ctx := context.Background()
	store, _ := blob.NewFS(t.TempDir())
	e := New(store, Options{ChunkSize: 1 << 20})
	if got, err := e.List(ctx, "nobody"); err != nil || len(got) != 0 {
		t.Fatalf("List of an unknown run = %v, %v", got, err)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Save(cctx, src, Meta{RunID: "r", Seq: 1}, nil); err == nil {
		t.Fatal("a cancelled save must fail")
	}
	if got, _ := e.List(ctx, "r"); len(got) != 0 {
		t.Fatalf("a failed save left %d visible checkpoints", len(got))
	}
}

// TestTarRoundTrip: a container's archive (a tar stream) checkpoints and
// restores to the same tree; a second archive of the unchanged tree reuses
// every chunk.
// TestLatest: the newest checkpoint by sequence number (10 after 9, not
// by string order), and ErrNoCheckpoint for a run without one.
func TestLatest(t *testing.T) {
	ctx := context.Background()
	store, _ := blob.NewFS(t.TempDir())
	e := New(store, Options{ChunkSize: 1 << 20})
	if _, err := e.Latest(ctx, "r"); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Latest of a run without checkpoints = %v, want ErrNoCheckpoint", err)
	}
	src := t.TempDir()
	for seq := 1; seq <= 10; seq++ {
		if err := os.WriteFile(filepath.Join(src, "n"), []byte{byte(seq)}, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Save(ctx, src, Meta{RunID: "r", Seq: seq}, nil); err != nil {
			t.Fatal(err)
		}
	}
	m, err := e.Latest(ctx, "r")
	if err != nil || m.Seq != 10 {
		t.Fatalf("Latest = %v, %v; want #10", m, err)
	}
}
