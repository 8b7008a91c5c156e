package runs

import (
	"time"

	"github.com/mlrb/mlrb/internal/contract"
	"github.com/mlrb/mlrb/internal/observe"
)

// Research is the run's experiments and measures, derived from its
// attempts' observations: a model is scored by the final evaluation
// when it is the final checkpoint's, else by the mark that fell on its
// checkpoint.
func Research(r *Result, obs []*observe.Observation, minExperiment time.Duration) observe.Research {
	scores := map[int]observe.Scored{}
	for _, m := range r.Curve {
		if m.Score != nil && m.Seq > 0 {
			scores[m.Seq] = observe.Scored{Score: *m.Score, Split: m.Split}
		}
	}
	final := r.FinalSeq()
	if final > 0 && r.Score != nil {
		scores[final] = observe.Scored{Score: *r.Score, Split: contract.SplitTest}
	}
	return observe.Derive(observe.Input{Observations: obs, Scores: scores, MinExperiment: minExperiment, BudgetS: r.Budget.GrantedS(), AgentS: r.Budget.UsedS})
}

// FinalSeq is the checkpoint the run's final evaluation scored: the last
// final one it accepted (0: none).
func (r *Result) FinalSeq() int {
	seq := 0
	for _, c := range r.CheckpointLog {
		if c.Final && c.Seq > seq {
			seq = c.Seq
		}
	}
	return seq
}
