package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// behind is a store whose clock runs behind this host's (or, as seen
// from it, a GC host whose clock runs fast): every time it lists is
// shifted back.
type behind struct {
	blob.Store
	by time.Duration
}

func (b behind) List(ctx context.Context, prefix string) ([]blob.Object, error) {
	objs, err := b.Store.List(ctx, prefix)
	for i := range objs {
		objs[i].ModTime = objs[i].ModTime.Add(-b.by)
	}
	return objs, err
}

// TestGCJudgesAgeByTheStoresClock is audit #14: GC compared the store's
// modification times with its own clock, so from a host two hours fast a
// chunk a save had just uploaded looked past a one-hour grace and was
// deleted, and a save's live lock looked stale. Ages are the store's.
func TestGCJudgesAgeByTheStoresClock(t *testing.T) {
	ctx := context.Background()
	fs, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := behind{Store: fs, by: 2 * time.Hour}
	e := New(store, Options{ChunkSize: 64 << 10})
	// A chunk uploaded now that no manifest references yet (a save in
	// flight commits its manifest last).
	if _, err := e.putChunk(ctx, chunkHash([]byte("in flight")), []byte("in flight"), e.bufs.get(), true); err != nil {
		t.Fatal(err)
	}
	// A save's lock, live.
	if err := e.putLock(ctx, saveLockPrefix+"live.json", "save"); err != nil {
		t.Fatal(err)
	}
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := e.GC(gctx, GCOptions{Grace: time.Hour}); err == nil {
		t.Fatal("GC ran beside a live save's lock")
	}
	if err := store.Delete(ctx, saveLockPrefix+"live.json"); err != nil {
		t.Fatal(err)
	}
	rep, err := e.GC(ctx, GCOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Deleted != 0 || rep.TooYoung != 1 {
		t.Fatalf("GC deleted a chunk uploaded a moment ago: %+v", rep)
	}
}

// TestForkReusesOnlyStoredChunks (audit #14): a fork's first save reused
// its source checkpoint's chunk lists unchecked; once the source's
// retention dropped that checkpoint and a GC its chunks, the fork
// committed references to missing chunks. They are checked, and a file
// whose chunks are gone is read again.
func TestForkReusesOnlyStoredChunks(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	store, err := blob.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	e := New(store, Options{ChunkSize: 64 << 10})
	e.RacyWindow = time.Nanosecond
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "weights"), []byte("the source run's weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(src, "weights"), old, old); err != nil {
		t.Fatal(err)
	}
	m1, err := e.Save(ctx, src, Meta{RunID: "source", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := m1.Files[0].Stored()[0]
	if err := os.Remove(filepath.Join(root, "chunks", h[:2], h)); err != nil {
		t.Fatal(err) // the source's retention and a GC took it
	}
	fork := New(store, Options{ChunkSize: 64 << 10}) // another worker: nothing known
	m2, err := fork.Save(ctx, src, Meta{RunID: "fork", Seq: 1}, m1)
	if err != nil {
		t.Fatal(err)
	}
	if err := fork.Restore(ctx, m2, t.TempDir()); err != nil {
		t.Fatalf("the fork's checkpoint references a missing chunk: %v", err)
	}
}
