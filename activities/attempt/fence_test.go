package attempt

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// TestZombieManifestAfterTheFenceIsSteppedOver is audit #5: attempt 1 (a
// zombie) passed its fence check before attempt 2 fenced, and its #2
// lands after the fence. Attempt 2's first save of #2 finds the number
// taken; it must number on past it and commit, not retry #2 for ever.
func TestZombieManifestAfterTheFenceIsSteppedOver(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := checkpoint.New(store, checkpoint.Options{ChunkSize: 1 << 20})
	ws := &workspace.DirWorkspace{Engine: e}
	at := &workspace.Attempt{RunID: "r", N: 2, Dir: t.TempDir()}
	if err := os.MkdirAll(at.Workdir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(at.Workdir(), "w"), []byte("attempt 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Save(ctx, at.Workdir(), checkpoint.Meta{RunID: "r", Seq: 1, Attempt: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Fence(ctx, "r", 2, 1); err != nil {
		t.Fatal(err)
	}
	zombie, _ := json.Marshal(checkpoint.Manifest{Version: 2, RunID: "r", Seq: 2, Attempt: 1, ChunkSize: 1 << 20})
	if err := store.Create(ctx, checkpoint.ManifestKey("r", 2), bytes.NewReader(zombie)); err != nil {
		t.Fatal(err)
	}
	notes := newNotifier(ctx, func(context.Context, string, any) error { return nil }, zap.NewNop())
	defer notes.close()
	c := &checkpointer{ws: ws, engine: e, at: at, seq: 2, notes: notes, log: zap.NewNop()}
	for i := 0; i < 3; i++ {
		ref, err := c.take(ctx, float64(i), nil)
		if err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		if want := 3 + i; ref.Seq != want {
			t.Fatalf("save %d committed #%d; want #%d", i, ref.Seq, want)
		}
	}
	m, err := e.Latest(ctx, "r")
	if err != nil || m.Seq != 5 || m.Attempt != 2 {
		t.Fatalf("latest = %+v, %v; want attempt 2's #5", m, err)
	}
}
