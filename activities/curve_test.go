package activities

import (
	"testing"

	"github.com/mlrb/mlrb/internal/checkpoint"
)

// TestNearestCheckpoints: each mark takes the checkpoint nearest to it in
// agent time (the earlier on a tie); one after the mark only within the
// slack; none at all is "no checkpoint yet", never a 0.
func TestNearestCheckpoints(t *testing.T) {
	var own []*checkpoint.Manifest
	for i, s := range []float64{600, 1200, 3700, 7000, 14400} {
		own = append(own, &checkpoint.Manifest{Seq: i + 1, AgentSeconds: s})
	}
	// Marks: 5 min (only #1 at 10 min, past the slack), 1 h (#3, 100 s
	// late, within the slack), 1.5 h (#4 is nearer, but past the slack:
	// #3), 2 h (#4), 8 h (#5).
	got := nearest(own, []float64{300, 3600, 5400, 7200, 28800}, 200)
	want := []int{0, 3, 3, 4, 5}
	for i, m := range got {
		if m.Seq != want[i] {
			t.Fatalf("mark %v: checkpoint #%d, want #%d", m.AtS, m.Seq, want[i])
		}
	}
	if got[0].NoModel == "" || got[0].Score != nil || got[1].AgentS != 3700 {
		t.Fatalf("marks %+v", got)
	}
	if tie := nearest(own, []float64{900}, 600); tie[0].Seq != 1 {
		t.Fatalf("a tie takes #%d, want the earlier #1", tie[0].Seq)
	}
}
