package bundle

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

// TestVerifyReadsNoMoreThanSigned (audit L1): a FIFO in a subject's place
// is refused at once (never waited on), and a sparse file of a terabyte
// is refused by its signed size before a byte is read.
func TestVerifyReadsNoMoreThanSigned(t *testing.T) {
	store, s, v := fixture(t)
	for name, swap := range map[string]func(p string) error{
		"fifo": func(p string) error { return unix.Mkfifo(p, 0o644) },
		"sparse terabyte": func(p string) error {
			f, err := os.Create(p)
			if err == nil {
				err = f.Truncate(1 << 40)
				_ = f.Close()
			}
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := write(t, store, s)
			p := filepath.Join(dir, filepath.FromSlash(blob.RunPrefix(runID)+"result.json"))
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := swap(p); err != nil {
				t.Skipf("this file system cannot: %v", err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := verifyDir(t, dir, EnvelopeKey(runID), []*Verifier{v}, nil)
				done <- err
			}()
			select {
			case err := <-done:
				var mm *Mismatch
				if !errors.As(err, &mm) || !strings.Contains(mm.Piece, "result.json") {
					t.Fatalf("verify: %v, want a mismatch naming result.json", err)
				}
				t.Logf("refused: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("verify is still reading the file 30 s on")
			}
		})
	}
}

// TestStoreServesOnlyWhatWasVerified (audit C1b): files added beside a
// verified bundle do not exist in its store, nor are they listed; bytes
// swapped in after verify are an error, never data; the store is
// read-only.
func TestStoreServesOnlyWhatWasVerified(t *testing.T) {
	ctx := context.Background()
	store, s, v := fixture(t)
	dir := write(t, store, s)
	root, err := safefs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = root.Close() }()
	c, err := Verify(ctx, root, EnvelopeKey(runID), []*Verifier{v}, nil)
	if err != nil {
		t.Fatal(err)
	}
	added := map[string]string{
		"controls/task/evil.json":             `{"run_id":"evil"}`,
		"runs/evil/checkpoints/00000001.json": `{}`,
		blob.RunPrefix(runID) + "extra.json":  `{}`,
	}
	for k, b := range added {
		p := filepath.Join(dir, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vs := Union(root, []*Checked{c})
	for k := range added {
		if _, err := vs.Get(ctx, k); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("%s, added after signing: %v, want not found", k, err)
		}
		if ok, _ := vs.Exists(ctx, k); ok {
			t.Fatalf("%s exists", k)
		}
	}
	for _, prefix := range []string{"controls/", "runs/evil/", blob.RunPrefix(runID) + "extra"} {
		if l, _ := vs.List(ctx, prefix); len(l) != 0 {
			t.Fatalf("list %s: %v", prefix, l)
		}
	}
	// The model restores from what was verified alone.
	e := checkpoint.New(vs, checkpoint.Options{})
	m, err := e.Load(ctx, runID, 1)
	if err == nil {
		err = e.Restore(ctx, m, t.TempDir())
	}
	if err != nil {
		t.Fatalf("restore from the verified store: %v", err)
	}
	// Swapped after verify: the same size, other bytes.
	res := blob.RunPrefix(runID) + "result.json"
	p := filepath.Join(dir, filepath.FromSlash(res))
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if rc, err := vs.Get(ctx, res); err == nil {
		_, err = io.ReadAll(rc)
		_ = rc.Close()
		if err == nil {
			t.Fatal("bytes swapped in after verify were served")
		}
	}
	if err := vs.Put(ctx, res, strings.NewReader("x")); err == nil {
		t.Fatal("the verified store took a write")
	}
}

// TestAStatementLiesUnderItsRun: a signed run's bundle moved under
// another run's name does not verify as that run.
func TestAStatementLiesUnderItsRun(t *testing.T) {
	store, s, v := fixture(t)
	dir := write(t, store, s)
	from := filepath.Join(dir, filepath.FromSlash(blob.RunPrefix(runID)))
	if err := os.Rename(from, filepath.Join(dir, "runs", "other")); err != nil {
		t.Fatal(err)
	}
	var mm *Mismatch
	if _, err := verifyDir(t, dir, "runs/other/bundle/"+EnvelopeFile, []*Verifier{v}, nil); !errors.As(err, &mm) || !strings.Contains(mm.Why, "statement is of run") {
		t.Fatalf("a bundle under another run's name: %v", err)
	}
}
