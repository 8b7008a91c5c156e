package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

// TestDirectAndBufferedRestoresAgree: files restored with O_DIRECT
// (whole chunks, the last padded to a block and cut back) come out byte
// for byte as the page cache's writes make them, at their exact sizes,
// whatever their tails.
func TestDirectAndBufferedRestoresAgree(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	sizes := map[string]int{
		"exact.bin":      directMin,
		"one-more.bin":   directMin + 1,
		"odd-tail.bin":   5<<20 + 4095,
		"block-less.bin": 3<<20 - 1,
		"small.bin":      directMin - 1,
	}
	for name, n := range sizes {
		randomFile(t, filepath.Join(src, "w", name), n, uint64(n))
	}
	e := New(store, Options{ChunkSize: 256 << 10, Parallel: 4})
	m, err := e.Save(ctx, src, Meta{RunID: "direct", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := treeDigest(t, src)
	probe, err := os.CreateTemp(t.TempDir(), "probe")
	if err != nil {
		t.Fatal(err)
	}
	if !setDirect(probe) {
		testenv.Missing(t, "the test's file system refuses O_DIRECT: the direct path would go untested")
	}
	_ = probe.Close()
	for _, direct := range []bool{true, false} {
		directWrites = direct
		dst := filepath.Join(t.TempDir(), "out")
		err := e.Restore(ctx, m, dst)
		directWrites = true
		if err != nil {
			t.Fatalf("direct=%v: %v", direct, err)
		}
		got := treeDigest(t, dst)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("direct=%v: %s restored as %q, want %q", direct, k, got[k], v)
			}
		}
		for name, n := range sizes {
			st, err := os.Stat(filepath.Join(dst, "w", name))
			if err != nil || st.Size() != int64(n) {
				t.Errorf("direct=%v: %s is %v bytes (%v), want %d", direct, name, st.Size(), err, n)
			}
		}
	}
}

func TestAlignedBuf(t *testing.T) {
	for _, n := range []int{1, 4095, 4096, 4 << 20, 4<<20 + 3} {
		b := alignedBuf(n)
		if len(b) != n || cap(b) != roundUp(n) || !isAligned(b) {
			t.Errorf("alignedBuf(%d): len %d cap %d aligned %v", n, len(b), cap(b), isAligned(b))
		}
	}
}
