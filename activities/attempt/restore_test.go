package attempt

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/activities/host"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// TestRestoreFallsBackPastADamagedCheckpoint: a chunk of the latest
// checkpoint is missing, then corrupt; either way the workspace comes from
// the one before.
func TestRestoreFallsBackPastADamagedCheckpoint(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	store, err := blob.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	e := checkpoint.New(store, checkpoint.Options{ChunkSize: 1 << 20})
	src := t.TempDir()
	p := filepath.Join(src, "trial.json")
	if err := os.WriteFile(p, []byte(`{"n":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Save(ctx, src, checkpoint.Meta{RunID: "r", Seq: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(`{"n":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m2, err := e.Save(ctx, src, checkpoint.Meta{RunID: "r", Seq: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := m2.Files[0].Stored()[0]
	chunk := filepath.Join(root, "chunks", h[:2], h)
	a := &Attempts{Runs: host.Runs{Engine: checkpoint.New(store, checkpoint.Options{ChunkSize: 1 << 20})}, Logger: zap.NewNop()}
	for _, damage := range []string{"missing", "corrupt"} {
		if damage == "missing" {
			err = os.Remove(chunk)
		} else {
			err = os.WriteFile(chunk, []byte("not the chunk"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := t.TempDir()
		m, err := a.restoreLatest(ctx, "r", &activities.CheckpointRef{Seq: 2}, func(m *checkpoint.Manifest) error { return a.Runs.Engine.Restore(ctx, m, dst) })
		if err != nil {
			t.Fatalf("%s chunk: %v", damage, err)
		}
		b, _ := os.ReadFile(filepath.Join(dst, "trial.json"))
		if m.Seq != 1 || string(b) != `{"n":1}` {
			t.Fatalf("%s chunk: restored #%d with %s; want #1 with n=1", damage, m.Seq, b)
		}
	}
}
