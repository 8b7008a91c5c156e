package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// failingStore is a store that goes down (or whose reader is killed)
// after a number of chunk reads.
type failingStore struct {
	blob.Store
	left   atomic.Int64
	cancel context.CancelFunc // set: the reader is killed instead
}

var errStoreDown = errors.New("store down")

func (s *failingStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if strings.HasPrefix(key, "chunks/") && s.left.Add(-1) < 0 {
		if s.cancel != nil {
			s.cancel()
			return nil, ctx.Err()
		}
		return nil, errStoreDown
	}
	return s.Store.Get(ctx, key)
}

// TestInterruptedRestoreLeavesNoPartialFile: a restore cut off at any
// point, by the store going down or its reader killed, fails, and leaves
// no file under its name that is not whole (each is written under a
// private name and renamed when every chunk is in and verified), and no
// private name either: what is there is never a partial workspace read
// as whole.
func TestInterruptedRestoreLeavesNoPartialFile(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	want := map[string][]byte{}
	for i, size := range []int{0, 100, 3 << 20, 5<<20 + 7, 1 << 20, 2000} {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		name := filepath.Join("d", string(rune('a'+i))+".bin")
		if err := os.MkdirAll(filepath.Join(src, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		want[name] = b
	}
	m, err := New(store, Options{ChunkSize: 1 << 20}).Save(ctx, src, Meta{RunID: "r", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, f := range m.Files {
		for _, h := range f.Stored() {
			stored[h] = true
		}
	}
	chunks := len(stored)
	for _, killed := range []bool{false, true} {
		for after := 0; after < chunks; after++ {
			rctx, cancel := context.WithCancel(ctx)
			fs := &failingStore{Store: store}
			fs.left.Store(int64(after))
			if killed {
				fs.cancel = cancel
			}
			dst := filepath.Join(t.TempDir(), "ws")
			err := New(fs, Options{ChunkSize: 1 << 20, Parallel: 4}).Restore(rctx, m, dst)
			cancel()
			if err == nil {
				t.Fatalf("a restore cut off after %d of %d chunks (killed %v) succeeded", after, chunks, killed)
			}
			checkWhole(t, dst, want)
		}
	}
}

// checkWhole fails on any file under dst that is not whole, or that has
// no place in the checkpoint.
func checkWhole(t *testing.T, dst string, want map[string][]byte) {
	t.Helper()
	_ = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dst, p)
		w, ok := want[rel]
		if !ok {
			t.Fatalf("an interrupted restore left %s", rel)
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, w) {
			t.Fatalf("an interrupted restore left %s partial: %d of %d bytes right", rel, len(got), len(w))
		}
		return nil
	})
}
