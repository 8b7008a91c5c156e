package checkpoint

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mlrb/mlrb/internal/blob"
)

// TestPruneSparesTheCurvesCheckpoints: retention keeps, beside the last
// keep and the final, the checkpoints either side of each curve mark,
// so the mark's nearest checkpoint is there after the run.
func TestPruneSparesTheCurvesCheckpoints(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := New(store, Options{ChunkSize: 64 << 10})
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a.txt"), []byte("one"))
	// Checkpoints every 10 s of agent time: #1 at 10 s ... #10 at 100 s.
	for seq := 1; seq <= 10; seq++ {
		if _, err := e.Save(ctx, src, Meta{RunID: "r", Seq: seq, Attempt: 1, AgentSeconds: float64(10 * seq)}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Prune(ctx, "r", 2, 25, 40); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := e.List(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	var kept []int
	for _, m := range ms {
		kept = append(kept, m.Seq)
	}
	// 25 s: #2 and #3; 40 s: #4 and #5; the last two: #9 and #10.
	if want := []int{2, 3, 4, 5, 9, 10}; !slices.Equal(kept, want) {
		t.Fatalf("kept %v, want %v", kept, want)
	}
}
