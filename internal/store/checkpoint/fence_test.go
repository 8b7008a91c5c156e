package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/testkit/s3test"
)

// fenceStores are the stores fencing must hold on: the filesystem one
// (link(2)) and a real S3 API server (If-None-Match).
var fenceStores = map[string]func(t *testing.T) blob.Store{
	"fs": func(t *testing.T) blob.Store {
		s, err := blob.NewFS(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	},
	"s3": func(t *testing.T) blob.Store { return s3test.Start(t).Store("fence") },
}

// TestZombieAttemptCommitsNothing: attempt 1 checkpoints #1 and #2, is
// cut off, and attempt 2 takes the run over from #1 (the run never heard
// of #2). From then on attempt 1's commits are refused; #2, which it
// wrote before the fence, is superseded: not the latest, not loadable,
// dropped by Prune; attempt 2's own checkpoints are the run's.
func TestZombieAttemptCommitsNothing(t *testing.T) {
	for name, open := range fenceStores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := New(open(t), Options{ChunkSize: 64 << 10})
			src := t.TempDir()
			writeFile(t, filepath.Join(src, "a.txt"), []byte("one"))
			save := func(seq, attempt int) error {
				_, err := e.Save(ctx, src, Meta{RunID: "r", Seq: seq, Attempt: attempt}, nil)
				return err
			}
			for seq := 1; seq <= 2; seq++ {
				if err := save(seq, 1); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Fence(ctx, "r", 2, 1); err != nil {
				t.Fatal(err)
			}
			var fenced *FencedError
			if err := save(3, 1); !errors.As(err, &fenced) || fenced.By != 2 {
				t.Fatalf("the zombie's commit after the fence: %v", err)
			}
			if err := e.Fence(ctx, "r", 1, 2); !errors.As(err, &fenced) {
				t.Fatalf("a superseded attempt fenced the run: %v", err)
			}
			var taken *SeqTakenError
			if err := save(2, 2); !errors.As(err, &taken) || taken.Attempt != 1 {
				t.Fatalf("attempt 2 on the zombie's #2: %v", err)
			}
			if err := save(3, 2); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Load(ctx, "r", 2); !errors.Is(err, ErrSuperseded) {
				t.Fatalf("load the zombie's #2: %v", err)
			}
			if m, err := e.Load(ctx, "r", 1); err != nil || m.Attempt != 1 {
				t.Fatalf("attempt 1's #1 (before the fence) is the run's: %+v %v", m, err)
			}
			if m, err := e.Latest(ctx, "r"); err != nil || m.Seq != 3 || m.Attempt != 2 {
				t.Fatalf("latest = %+v, %v", m, err)
			}
			ms, err := e.List(ctx, "r")
			if err != nil || len(ms) != 3 || ms[1].SupersededBy != 2 || ms[0].SupersededBy != 0 || ms[2].SupersededBy != 0 {
				t.Fatalf("list: %v %v", ms, err)
			}
			if n, err := e.Prune(ctx, "r", 5); err != nil || n != 1 {
				t.Fatalf("prune dropped %d, %v", n, err)
			}
			if ms, _ := e.List(ctx, "r"); len(ms) != 2 {
				t.Fatalf("after prune: %d checkpoints", len(ms))
			}
		})
	}
}

// TestLatestSkipsAZombiesCheckpoint: attempt 2 took over from #1 and has
// committed nothing yet; the zombie's later #2 must not be the latest.
func TestLatestSkipsAZombiesCheckpoint(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := New(store, Options{ChunkSize: 64 << 10})
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a.txt"), []byte("one"))
	for seq := 1; seq <= 2; seq++ {
		if _, err := e.Save(ctx, src, Meta{RunID: "r", Seq: seq, Attempt: 1}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Fenced after the zombie wrote #2 (it raced the fence), from #1.
	if err := e.Fence(ctx, "r", 2, 1); err != nil {
		t.Fatal(err)
	}
	if m, err := e.Latest(ctx, "r"); err != nil || m.Seq != 1 {
		t.Fatalf("latest = %+v, %v", m, err)
	}
}

// TestRacingCommitsOneWins: two attempts commit the same sequence number
// at once, many times over; each time exactly one wins and the stored
// manifest is the winner's.
func TestRacingCommitsOneWins(t *testing.T) {
	for name, open := range fenceStores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := New(open(t), Options{ChunkSize: 64 << 10})
			src := t.TempDir()
			writeFile(t, filepath.Join(src, "a.txt"), []byte("one"))
			for seq := 1; seq <= 20; seq++ {
				var wg sync.WaitGroup
				errs := make([]error, 3)
				for a := 1; a <= 2; a++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, errs[a] = e.Save(ctx, src, Meta{RunID: "r", Seq: seq, Attempt: a}, nil)
					}()
				}
				wg.Wait()
				winner := 0
				for a := 1; a <= 2; a++ {
					var taken *SeqTakenError
					switch {
					case errs[a] == nil:
						winner = a
					case !errors.As(errs[a], &taken):
						t.Fatalf("#%d attempt %d: %v", seq, a, errs[a])
					}
				}
				m, err := e.Load(ctx, "r", seq)
				if errors.Is(errs[1], nil) == errors.Is(errs[2], nil) || err != nil || m.Attempt != winner {
					t.Fatalf("#%d: errors %v; stored %+v (%v); winner %d", seq, fmt.Sprint(errs[1:]), m, err, winner)
				}
			}
		})
	}
}
