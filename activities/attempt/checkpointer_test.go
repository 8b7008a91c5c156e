package attempt

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// TestFinalCheckpointHeldForTheResult: an attempt asked for its last
// checkpoint in its result (LastInResult) signals every periodic commit
// and returns the final one without signalling it; otherwise the final
// one is signalled too.
func TestFinalCheckpointHeldForTheResult(t *testing.T) {
	for _, hold := range []bool{true, false} {
		ctx := context.Background()
		store, err := blob.NewFS(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		e := checkpoint.New(store, checkpoint.Options{ChunkSize: 1 << 20})
		at := &workspace.Attempt{RunID: "r", N: 1, Dir: t.TempDir()}
		if err := os.MkdirAll(at.Workdir(), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(at.Workdir(), "model"), []byte("weights"), 0o644); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []int
		notes := newNotifier(ctx, func(_ context.Context, name string, arg any) error {
			if name == activities.SignalCheckpoint {
				mu.Lock()
				got = append(got, arg.(activities.CheckpointRef).Seq)
				mu.Unlock()
			}
			return nil
		}, zap.NewNop())
		c := &checkpointer{ws: &workspace.DirWorkspace{Engine: e}, engine: e, at: at, seq: 1, notes: notes, holdFinal: hold, log: zap.NewNop()}
		if _, err := c.save(ctx, 1, nil); err != nil {
			t.Fatal(err)
		}
		ref, err := c.final(ctx, 2, &checkpoint.Ending{StoppedBy: string(activities.StopExited)})
		if err != nil {
			t.Fatal(err)
		}
		if err := notes.flush(ctx); err != nil {
			t.Fatal(err)
		}
		notes.close()
		want := []int{1, 2}
		if hold {
			want = want[:1]
		}
		if ref == nil || ref.Seq != 2 || !ref.Final || ref.From != 1 || !slices.Equal(got, want) {
			t.Fatalf("hold %v: final %+v, signalled %v; want #2 returned and %v signalled", hold, ref, got, want)
		}
	}
}
