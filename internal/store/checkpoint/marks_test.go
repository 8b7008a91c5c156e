package checkpoint

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
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

// TestPickAgreesWithRetention: for runs of checkpoints at random agent
// times (equal times included), random marks and slacks, the checkpoint
// picked for each mark after the run is one that retention, pruning at
// any earlier point of the run, spared (NearMarks of what was committed
// then) or had not seen yet.
func TestPickAgreesWithRetention(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n := 1 + rng.IntN(12)
		ms := make([]*Manifest, n)
		at := 0.0
		for i := range ms {
			at += float64(rng.IntN(3)) * 10 // 0: two checkpoints at one agent time
			ms[i] = &Manifest{Seq: i + 1, AgentSeconds: at}
		}
		marks := []float64{float64(rng.IntN(int(at) + 20)), float64(rng.IntN(int(at) + 20))}
		slack := float64(rng.IntN(15))
		for _, mark := range marks {
			picked := PickMark(ms, mark, slack)
			if picked == nil {
				continue
			}
			for p := 1; p <= n; p++ {
				if picked.Seq <= p && !NearMarks(ms[:p], marks)[picked.Seq] {
					t.Fatalf("trial %d: mark %v picks #%d (at %v), which a prune after #%d drops: %v", trial, mark, picked.Seq, picked.AgentSeconds, p, times(ms))
				}
			}
		}
	}
}

func times(ms []*Manifest) []float64 {
	out := make([]float64, len(ms))
	for i, m := range ms {
		out[i] = m.AgentSeconds
	}
	return out
}
