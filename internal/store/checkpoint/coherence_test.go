package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
)

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRestoreAcrossAChunkSizeChange: a host with another chunk size takes
// the next checkpoint of a workspace whose big file did not change; the
// restore is byte-identical, whatever the restoring engine's size.
func TestRestoreAcrossAChunkSizeChange(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	big := randomBytes(t, 3<<20+12345)
	writeFile(t, filepath.Join(src, "weights.bin"), big)
	small := New(store, Options{ChunkSize: 64 << 10})
	m1, err := small.Save(ctx, src, Meta{RunID: "r", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The workspace is quiet: the next save would reuse the file's chunks.
	m1.CreatedAt = m1.CreatedAt.Add(DefaultRacyWindow * 10)
	writeFile(t, filepath.Join(src, "log.txt"), []byte("step 2\n"))
	large := New(store, Options{ChunkSize: 1 << 20})
	m2, err := large.Save(ctx, src, Meta{RunID: "r", Seq: 2}, m1)
	if err != nil {
		t.Fatal(err)
	}
	for _, restorer := range []*Engine{small, large, New(store, Options{ChunkSize: 256 << 10})} {
		dst := t.TempDir()
		if err := restorer.Restore(ctx, m2, dst); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dst, "weights.bin"))
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("restored with a %d-byte engine: %d bytes, identical %v (%v)", restorer.ChunkSize, len(got), bytes.Equal(got, big), err)
		}
	}
}

// TestGCInAnotherProcessThenRevertedContent: a worker's engine has stored
// content X; X is checkpointed over, pruned and collected by a GC in
// another process (its own engine); the worker's agent then writes X
// again. The next checkpoint must store X's chunks again, not point at
// the collected ones.
func TestGCInAnotherProcessThenRevertedContent(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	worker, gc := New(store, Options{ChunkSize: 64 << 10}), New(store, Options{ChunkSize: 64 << 10})
	src := t.TempDir()
	x, y := randomBytes(t, 200<<10), randomBytes(t, 200<<10)
	p := filepath.Join(src, "model.bin")
	writeFile(t, p, x)
	if _, err := worker.Save(ctx, src, Meta{RunID: "r", Seq: 1}, nil); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, y)
	m2, err := worker.Save(ctx, src, Meta{RunID: "r", Seq: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := worker.Prune(ctx, "r", 1); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	rep, err := gc.GC(ctx, GCOptions{})
	if err != nil || rep.Deleted == 0 {
		t.Fatalf("gc: %+v, %v", rep, err)
	}
	writeFile(t, p, x)
	m3, err := worker.Save(ctx, src, Meta{RunID: "r", Seq: 3}, m2)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := worker.Restore(ctx, m3, dst); err != nil {
		t.Fatalf("restore of the reverted content: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "model.bin")); !bytes.Equal(got, x) {
		t.Fatal("restored content is not the reverted content")
	}
}

// TestHardlinksRoundTrip: a model file hardlinked into output/ is stored
// once and restored as a link to the same content.
func TestHardlinksRoundTrip(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	w := randomBytes(t, 300<<10)
	writeFile(t, filepath.Join(src, "ckpt/model.safetensors"), w)
	if err := os.MkdirAll(filepath.Join(src, "output/model"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(src, "ckpt/model.safetensors"), filepath.Join(src, "output/model/model.safetensors")); err != nil {
		t.Fatal(err)
	}
	e := New(store, Options{ChunkSize: 64 << 10})
	m, err := e.Save(ctx, src, Meta{RunID: "h", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Bytes != int64(len(w)) {
		t.Fatalf("bytes %d: the linked content must count once (%d)", m.Bytes, len(w))
	}
	dst := t.TempDir()
	if err := e.Restore(ctx, m, dst); err != nil {
		t.Fatal(err)
	}
	a, errA := os.Stat(filepath.Join(dst, "ckpt/model.safetensors"))
	b, errB := os.Stat(filepath.Join(dst, "output/model/model.safetensors"))
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Fatalf("the hardlink is not restored as one: %v %v", errA, errB)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "output/model/model.safetensors")); !bytes.Equal(got, w) {
		t.Fatal("linked content differs")
	}
}

// TestCommitNeverOverwritesAnotherAttempt: a sequence number committed
// by one attempt is refused to another; the same attempt may commit it
// again (a retried save).
func TestCommitNeverOverwritesAnotherAttempt(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := New(store, Options{ChunkSize: 64 << 10})
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a.txt"), []byte("one"))
	if _, err := e.Save(ctx, src, Meta{RunID: "r", Seq: 4, Attempt: 1, Final: true}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Save(ctx, src, Meta{RunID: "r", Seq: 4, Attempt: 1, Final: true}, nil); err != nil {
		t.Fatalf("the same attempt again: %v", err)
	}
	var taken *SeqTakenError
	if _, err := e.Save(ctx, src, Meta{RunID: "r", Seq: 4, Attempt: 2}, nil); !errors.As(err, &taken) || taken.Attempt != 1 {
		t.Fatalf("another attempt on #4: %v", err)
	}
	m, err := e.Load(ctx, "r", 4)
	if err != nil || m.Attempt != 1 || !m.Final {
		t.Fatalf("#4 must stay attempt 1's final: %+v, %v", m, err)
	}
}

// TestRestoreRace: the agent leaves, beside file x, a symlink named as a
// restore's temp file once was (x.mlrb-restore) pointing at a host file.
// The restore writes x through a name of its own and never touches the
// host file.
func TestRestoreRace(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(t.TempDir(), "shadow")
	writeFile(t, host, []byte("host file"))
	if err := os.Chmod(host, 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(host)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "x"), randomBytes(t, 200<<10))
	if err := os.Chmod(filepath.Join(src, "x"), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"x.mlrb-restore", ".x.mlrb-restore"} {
		if err := os.Symlink(host, filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	e := New(store, Options{ChunkSize: 64 << 10})
	m, err := e.Save(ctx, src, Meta{RunID: "race", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := e.Restore(ctx, m, dst); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(host)
	if b, _ := os.ReadFile(host); string(b) != "host file" || after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("the host file was touched: %q %v %v", b, after.Mode(), after.ModTime())
	}
	if st, err := os.Stat(filepath.Join(dst, "x")); err != nil || st.Mode().Perm() != 0o777 {
		t.Fatalf("x restored as %v, %v", st, err)
	}
}

// TestRestoreNeverWritesThroughASymlink: a manifest whose directory "a"
// is a symlink to a host dir and which holds a file "a/evil" (a crafted
// or tampered manifest) is refused; nothing lands in the host dir.
func TestRestoreNeverWritesThroughASymlink(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir()
	e := New(store, Options{ChunkSize: 64 << 10})
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "evil"), []byte("payload"))
	m, err := e.Save(ctx, src, Meta{RunID: "crafted", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	file := m.Files[0]
	file.Path = "a/evil"
	m.Files = []File{{Path: "a", Mode: os.ModeSymlink | 0o777, Link: hostDir}, file}
	for _, attempt := range []*Manifest{m} {
		err := e.Restore(ctx, attempt, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("restore = %v; want a refusal", err)
		}
	}
	if entries, _ := os.ReadDir(hostDir); len(entries) != 0 {
		t.Fatalf("the restore wrote into the host dir: %v", entries)
	}
}

// TestExcludedPathsAreNeverSaved: the Hugging Face token a login writes
// into the checkpointed cache stays out of every checkpoint.
func TestExcludedPathsAreNeverSaved(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "root/.cache/huggingface/token"), []byte("hf_SECRETTOKEN"))
	writeFile(t, filepath.Join(src, "root/.cache/huggingface/stored_tokens/default"), []byte("hf_SECRETTOKEN"))
	writeFile(t, filepath.Join(src, "root/.cache/huggingface/hub/model.bin"), []byte("weights"))
	e := New(store, Options{ChunkSize: 64 << 10})
	e.Exclude = []string{"root/.cache/huggingface/token", "root/.cache/huggingface/stored_tokens"}
	m, err := e.Save(ctx, src, Meta{RunID: "x", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range m.Files {
		paths = append(paths, f.Path)
		if strings.Contains(f.Path, "token") {
			t.Fatalf("%s was checkpointed", f.Path)
		}
	}
	if !slices.Contains(paths, "root/.cache/huggingface/hub/model.bin") {
		t.Fatalf("the rest of the cache is gone too: %v", paths)
	}
	objs, _ := store.List(ctx, "chunks/")
	for _, o := range objs {
		rc, _ := store.Get(ctx, o.Key)
		b, _ := io.ReadAll(rc)
		_ = rc.Close()
		if plain, err := decoder.DecodeAll(b, nil); err == nil && bytes.Contains(plain, []byte("hf_SECRETTOKEN")) {
			t.Fatal("the token reached the store")
		}
	}
}
