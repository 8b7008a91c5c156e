package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/testkit/s3test"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

func randomFile(t *testing.T, p string, size int, seed uint64) {
	t.Helper()
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestS3RoundTrip: a tree with nested dirs, empty files, a symlink, an
// executable and a 100 MB file survives S3 byte for byte; a second run of
// the same tree uploads nothing; rclone sees exactly the manifest's chunks.
func TestS3RoundTrip(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	src := t.TempDir()
	writeTree(t, src)
	randomFile(t, filepath.Join(src, "models/base/model.safetensors"), 100<<20, 1)
	e := New(srv.Store("ckpt"), Options{ChunkSize: 4 << 20})
	m, err := e.Save(ctx, src, Meta{RunID: "bench/a/t/s1", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := New(srv.Store("ckpt"), Options{ChunkSize: 4 << 20}).Restore(ctx, m, dst); err != nil {
		t.Fatal(err)
	}
	want, got := treeDigest(t, src), treeDigest(t, dst)
	if len(want) != len(got) {
		t.Fatalf("restored %d entries, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s differs after restore", k)
		}
	}
	m2, err := New(srv.Store("ckpt"), Options{ChunkSize: 4 << 20}).Save(ctx, src, Meta{RunID: "bench/a/t/s2", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m2.NewBytes != 0 {
		t.Fatalf("the same tree in another run uploaded %d bytes", m2.NewBytes)
	}

	rclone := testenv.Tool(t, "rclone", "apt-get install rclone")
	cmd := exec.Command(rclone, "lsf", "-R", "--files-only", ":s3:"+srv.Bucket+"/ckpt/chunks")
	cmd.Env = srv.RcloneEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rclone: %v: %s", err, out)
	}
	var listed []string
	for _, l := range strings.Fields(string(out)) {
		listed = append(listed, path.Base(l))
	}
	sort.Strings(listed)
	wantChunks := map[string]bool{}
	for _, f := range m.Files {
		for _, h := range f.Stored() {
			wantChunks[h] = true
		}
	}
	if len(listed) != len(wantChunks) {
		t.Fatalf("rclone lists %d chunks, the manifest references %d", len(listed), len(wantChunks))
	}
	for _, h := range listed {
		if !wantChunks[h] {
			t.Fatalf("rclone lists chunk %s the manifest does not reference", h)
		}
	}
}

// TestS3OutageMidCheckpoint: the server dies while chunks upload; no
// checkpoint becomes visible; after a restart the next one succeeds.
func TestS3OutageMidCheckpoint(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	src := t.TempDir()
	for i := 0; i < 12; i++ {
		randomFile(t, filepath.Join(src, "shards", "part-"+string(rune('a'+i))), 8<<20, uint64(i))
	}
	e := New(srv.Store("ckpt"), Options{ChunkSize: 1 << 20})
	e.Parallel = 2
	done := make(chan error, 1)
	go func() {
		_, err := e.Save(ctx, src, Meta{RunID: "r", Seq: 1}, nil)
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		objs, _ := e.Store.List(ctx, "chunks/")
		if len(objs) >= 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.Stop()
	if err := <-done; err == nil {
		t.Fatal("a checkpoint whose store died must fail")
	}
	srv.Restart()
	if ms, err := e.List(ctx, "r"); err != nil || len(ms) != 0 {
		t.Fatalf("after the outage: %d visible checkpoints, %v", len(ms), err)
	}
	m, err := e.Save(ctx, src, Meta{RunID: "r", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Restore(ctx, m, t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// gateStore holds manifest commits until released, to keep a save in flight.
type gateStore struct {
	blob.Store
	once    sync.Once
	reached chan struct{}
	release chan struct{}
}

func (g *gateStore) Create(ctx context.Context, key string, r io.Reader) error {
	if strings.Contains(key, "/checkpoints/") {
		g.once.Do(func() { close(g.reached) })
		<-g.release
	}
	return g.Store.Create(ctx, key, r)
}

// TestGCNeverDeletesReferencedChunks: retention turns old checkpoints into
// garbage, GC deletes only that, and a checkpoint in flight (its chunks
// stored, its manifest not yet) holds GC off until it commits.
func TestGCNeverDeletesReferencedChunks(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	store := srv.Store("ckpt")
	e := New(store, Options{ChunkSize: 1 << 20})
	src := t.TempDir()
	randomFile(t, filepath.Join(src, "w1"), 3<<20, 1)
	randomFile(t, filepath.Join(src, "w2"), 2<<20, 2)
	m1, err := e.Save(ctx, src, Meta{RunID: "r", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	randomFile(t, filepath.Join(src, "w2"), 2<<20, 3)
	m2, err := e.Save(ctx, src, Meta{RunID: "r", Seq: 2}, m1)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.Prune(ctx, "r", 1); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	dry, err := e.GC(ctx, GCOptions{DryRun: true})
	if err != nil || dry.Deleted != 2 {
		t.Fatalf("dry run = %+v, %v; want the 2 chunks only seq 1 had", dry, err)
	}
	rep, err := e.GC(ctx, GCOptions{})
	if err != nil || rep.Deleted != 2 || rep.Referenced != 5 {
		t.Fatalf("GC = %+v, %v", rep, err)
	}
	if err := e.Restore(ctx, m2, t.TempDir()); err != nil {
		t.Fatalf("restore after GC: %v", err)
	}

	// A save of another run is held just before its manifest commits.
	gate := &gateStore{Store: store, reached: make(chan struct{}), release: make(chan struct{})}
	other := New(gate, Options{ChunkSize: 1 << 20})
	src2 := t.TempDir()
	randomFile(t, filepath.Join(src2, "fresh"), 3<<20, 9)
	saved := make(chan error, 1)
	var m3 *Manifest
	go func() {
		var err error
		m3, err = other.Save(ctx, src2, Meta{RunID: "r2", Seq: 1}, nil)
		saved <- err
	}()
	<-gate.reached
	gctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if _, err := e.GC(gctx, GCOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GC beside a save in flight: %v; want it to wait", err)
	}
	close(gate.release)
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	if rep, err := e.GC(ctx, GCOptions{}); err != nil || rep.Deleted != 0 {
		t.Fatalf("GC after the commit = %+v, %v", rep, err)
	}
	if err := e.Restore(ctx, m3, t.TempDir()); err != nil {
		t.Fatalf("restore of the checkpoint that was in flight: %v", err)
	}
}

// TestTornFileNeverCommitted: a file that changes between the reads of
// its chunks is read again; one that keeps changing is unsettled: left
// out of a first checkpoint, kept at its previous version in a later one,
// never committed torn; a change that a coarse clock hides from the mtime
// is caught by the second read of a recently modified file.
func TestTornFileNeverCommitted(t *testing.T) {
	ctx := context.Background()
	store, _ := blob.NewFS(t.TempDir())
	src := t.TempDir()
	p := filepath.Join(src, "hot.bin")
	if err := os.WriteFile(filepath.Join(src, "quiet.txt"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(v byte) {
		if err := os.WriteFile(p, bytes.Repeat([]byte{v}, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name      string
		changes   int  // how many reads see a change after their first chunk
		keepMtime bool // the change does not move the mtime (coarse clock)
		wantTorn  bool
	}{
		{"changes once", 1, false, false},
		{"keeps changing", 100, false, true},
		{"hidden from mtime once", 1, true, false},
		{"hidden from mtime always", 100, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			write(0)
			e := New(store, Options{ChunkSize: 64 << 10})
			// Wide enough that the file written just above counts as racy
			// however slow this machine is.
			e.RacyWindow = 10 * time.Second
			v, left := byte(0), tc.changes
			e.readHook = func(rel string, chunk int) {
				if chunk != 0 || left == 0 {
					return
				}
				left--
				path := filepath.Join(src, rel)
				st, _ := os.Stat(path)
				v++
				write(v)
				if tc.keepMtime {
					_ = os.Chtimes(path, st.ModTime(), st.ModTime())
				}
			}
			m, err := e.Save(ctx, src, Meta{RunID: "hot-" + tc.name, Seq: 1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantTorn {
				if !slices.Equal(m.Unsettled, []string{"hot.bin"}) || len(m.Files) != 1 || m.Files[0].Path != "quiet.txt" {
					t.Fatalf("a new file that keeps changing must be left out and named: files %+v, unsettled %v", m.Files, m.Unsettled)
				}
				// Quiet for one checkpoint, then hot again: the next holds
				// the quiet version.
				e.readHook = nil
				write(7)
				quiet, err := e.Save(ctx, src, Meta{RunID: "hot-" + tc.name, Seq: 2}, m)
				if err != nil {
					t.Fatal(err)
				}
				left = tc.changes
				e.readHook = func(path string, chunk int) {
					if chunk == 0 && left > 0 {
						left--
						v++
						write(v)
					}
				}
				write(8) // newer than the quiet checkpoint: it must be read
				hot, err := e.Save(ctx, src, Meta{RunID: "hot-" + tc.name, Seq: 3}, quiet)
				if err != nil {
					t.Fatal(err)
				}
				dst := t.TempDir()
				if err := e.Restore(ctx, hot, dst); err != nil {
					t.Fatal(err)
				}
				b, _ := os.ReadFile(filepath.Join(dst, "hot.bin"))
				if !slices.Equal(hot.Unsettled, []string{"hot.bin"}) || !bytes.Equal(b, bytes.Repeat([]byte{7}, 1<<20)) {
					t.Fatalf("unsettled %v, restored first byte %d; want hot.bin named and its quiet version (7)", hot.Unsettled, b[0])
				}
				return
			}
			dst := t.TempDir()
			if err := e.Restore(ctx, m, dst); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(dst, "hot.bin"))
			if !bytes.Equal(b, bytes.Repeat([]byte{v}, 1<<20)) {
				t.Fatalf("checkpoint holds a torn or stale file (first byte %d, want %d)", b[0], v)
			}
		})
	}
}
