// Which checkpoints a run's curve scores.

package checkpoint

import "sort"

// The rule for which checkpoint stands for a curve mark lives here, once:
// PickMark chooses it after the run, NearMarks spares it from retention
// while the run goes on. Both read a mark's neighbours, so whatever is
// committed after a prune, the checkpoint picked is one retention kept.

// neighbours are the checkpoints of ms (one run's own, in commit order,
// so in agent time) next to the mark at: the last at or before it and the
// first after it (nil when there is none).
func neighbours(ms []*Manifest, at float64) (before, after *Manifest) {
	i := sort.Search(len(ms), func(i int) bool { return ms[i].AgentSeconds > at })
	if i > 0 {
		before = ms[i-1]
	}
	if i < len(ms) {
		after = ms[i]
	}
	return before, after
}

// NearMarks are the checkpoints (by seq) of ms that lie next to a mark:
// the last at or before it and the first after it. A mark's checkpoint
// (PickMark) is one of them, whatever is committed later.
func NearMarks(ms []*Manifest, marks []float64) map[int]bool {
	near := map[int]bool{}
	for _, at := range marks {
		before, after := neighbours(ms, at)
		if before != nil {
			near[before.Seq] = true
		}
		if after != nil {
			near[after.Seq] = true
		}
	}
	return near
}

// PickMark is the checkpoint of ms that stands for the mark at: of its
// neighbours the nearer in agent time, the one before on a tie, the one
// after only within slack (the checkpoint due at the mark may commit
// late); nil when there is none yet.
func PickMark(ms []*Manifest, at, slack float64) *Manifest {
	before, after := neighbours(ms, at)
	if after != nil && after.AgentSeconds <= at+slack && (before == nil || after.AgentSeconds-at < at-before.AgentSeconds) {
		return after
	}
	return before
}
