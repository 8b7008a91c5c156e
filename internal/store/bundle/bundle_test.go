package bundle

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

const runID = "b/agent/task/s0"

// fixture is an operator's store holding one run: a final checkpoint of a
// workspace with a model, its result and an evaluation's log.
func fixture(t *testing.T) (blob.Store, *Signer, *Verifier) {
	t.Helper()
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "model"), 0o755); err != nil {
		t.Fatal(err)
	}
	weights := bytes.Repeat([]byte("weights!"), 40<<10) // several chunks at 64 KiB
	for name, b := range map[string][]byte{"model/config.json": []byte(`{"x":1}`), "model/model.safetensors": weights} {
		if err := os.WriteFile(filepath.Join(ws, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := checkpoint.New(store, checkpoint.Options{ChunkSize: 64 << 10})
	if _, err := e.Save(ctx, ws, checkpoint.Meta{RunID: runID, Seq: 1, Attempt: 1, Final: true}, nil); err != nil {
		t.Fatal(err)
	}
	for key, body := range map[string]string{
		blob.RunPrefix(runID) + "result.json":                     `{"run_id":"b/agent/task/s0","outcome":"scored","score":0.75}`,
		blob.RunPrefix(runID) + "evaluations/try-1/evaluator.log": "scored\n",
	} {
		if err := store.Put(ctx, key, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	keys := filepath.Join(t.TempDir(), "op")
	if _, err := NewKeys(keys); err != nil {
		t.Fatal(err)
	}
	if _, err := NewKeys(keys); err == nil {
		t.Fatal("NewKeys wrote over an existing key")
	}
	s, err := LoadSigner(keys)
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadVerifier(keys + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return store, s, v
}

func write(t *testing.T, store blob.Store, s *Signer) string {
	t.Helper()
	dir := t.TempDir()
	w := &Writer{Dir: dir, Store: store, Signer: s, Parallel: 2}
	out, err := w.Run(context.Background(), Input{RunID: runID, Final: 1, Task: map[string]string{"id": "task"}, Agent: "a", Evaluator: "e",
		Predicate: Predicate{Task: "task"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Chunks < 2 || out.NewChunks != out.Chunks {
		t.Fatalf("bundled %d chunks, %d new: want several, all new", out.Chunks, out.NewChunks)
	}
	// Bundled again into the same directory: no chunk is written twice.
	again, err := w.Run(context.Background(), Input{RunID: runID, Final: 1, Task: "t", Agent: "a", Evaluator: "e"})
	if err != nil || again.NewChunks != 0 {
		t.Fatalf("bundled again: %v, %d new chunks", err, again.NewChunks)
	}
	return dir
}

// TestVerify: a bundle verifies with its operator's key and restores its
// model from the bundle alone; one byte flipped in a chunk, in the
// result or in the signature, or an untrusted key, is a Mismatch naming
// that piece; a directory that is no bundle is Unreadable.
func TestVerify(t *testing.T) {
	store, s, v := fixture(t)
	dir := write(t, store, s)
	key := EnvelopeKey(runID)
	c, err := verifyDir(t, dir, key, []*Verifier{v}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.RunID != runID || c.Chunks < 2 || len(c.Manifests) != 1 || c.TrustedAs == "" || !strings.Contains(string(c.Predicate.Result), `"score":0.75`) {
		t.Fatalf("checked %+v", c)
	}
	// Files a verify has read once (a benchmark's shared chunks) are not
	// read again for the next run that names them alike.
	seen := &Seen{}
	first, err := verifyDir(t, dir, key, []*Verifier{v}, seen)
	if err != nil {
		t.Fatal(err)
	}
	again, err := verifyDir(t, dir, key, []*Verifier{v}, seen)
	if err != nil || first.Bytes == 0 || again.Bytes != 0 || again.Files != first.Files {
		t.Fatalf("verified again: %v, read %d then %d bytes", err, first.Bytes, again.Bytes)
	}
	// The bundle is a store: the scored model restores from it alone.
	bs, err := blob.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := checkpoint.New(bs, checkpoint.Options{})
	m, err := e.Load(context.Background(), runID, 1)
	if err == nil {
		err = e.Restore(context.Background(), m, t.TempDir())
	}
	if err != nil {
		t.Fatalf("restore from the bundle: %v", err)
	}

	chunk := filepath.Join(dir, filepath.FromSlash(checkpoint.ChunkKey(m.Files[len(m.Files)-1].Chunks[1])))
	for _, tc := range []struct{ name, file, piece string }{
		{"chunk", chunk, "chunk chunks/"},
		{"result", filepath.Join(dir, filepath.FromSlash(blob.RunPrefix(runID)+"result.json")), "result.json"},
		{"signature", filepath.Join(dir, filepath.FromSlash(key)), "(signature)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			flipped := bytes.Clone(orig)
			i := len(flipped) / 2
			if tc.name == "signature" {
				at := bytes.Index(flipped, []byte(`"sig": "`))
				if at < 0 {
					t.Fatalf("no signature in the envelope:\n%s", orig)
				}
				i = at + 12
			}
			flipped[i] ^= 0x01
			if err := os.WriteFile(tc.file, flipped, 0o644); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = os.WriteFile(tc.file, orig, 0o644) }()
			_, err = verifyDir(t, dir, key, []*Verifier{v}, nil)
			var mm *Mismatch
			if !errors.As(err, &mm) || !strings.Contains(mm.Piece, tc.piece) {
				t.Fatalf("flipped a byte of the %s: %v, want a mismatch naming %q", tc.name, err, tc.piece)
			}
		})
	}
	if _, err := verifyDir(t, dir, key, []*Verifier{v}, nil); err != nil {
		t.Fatalf("restored bundle: %v", err)
	}

	other := filepath.Join(t.TempDir(), "other")
	if _, err := NewKeys(other); err != nil {
		t.Fatal(err)
	}
	ov, err := LoadVerifier(other + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	var mm *Mismatch
	if _, err := verifyDir(t, dir, key, []*Verifier{ov}, nil); !errors.As(err, &mm) || !strings.Contains(mm.Piece, "signature") {
		t.Fatalf("another operator's key: %v", err)
	}
	var un *Unreadable
	if _, err := Find(t.TempDir()); !errors.As(err, &un) {
		t.Fatalf("an empty dir: %v", err)
	}
	if keys, err := Find(dir); err != nil || len(keys) != 1 || keys[0] != key {
		t.Fatalf("Find: %v %v", keys, err)
	}
}

// TestVerifyStaysInside: a subject that is a link out of the bundle is
// never followed.
func TestVerifyStaysInside(t *testing.T) {
	store, s, v := fixture(t)
	dir := write(t, store, s)
	log := filepath.Join(dir, filepath.FromSlash(blob.RunPrefix(runID)+"evaluations/try-1/evaluator.log"))
	outside := filepath.Join(t.TempDir(), "evaluator.log")
	if err := os.WriteFile(outside, []byte("scored\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, log); err != nil {
		t.Fatal(err)
	}
	var mm *Mismatch
	if _, err := verifyDir(t, dir, EnvelopeKey(runID), []*Verifier{v}, nil); !errors.As(err, &mm) || !strings.Contains(mm.Piece, "evaluator.log") {
		t.Fatalf("a link out: %v", err)
	}
}

// verifyDir verifies the bundle at key in dir, opened for the call.
func verifyDir(t *testing.T, dir, key string, trusted []*Verifier, seen *Seen) (*Checked, error) {
	t.Helper()
	root, err := safefs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = root.Close() }()
	return Verify(context.Background(), root, key, trusted, seen)
}
