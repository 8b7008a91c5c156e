// Complete adds to a run's result what only the store knows, and the workflow never holds.

package runresults

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/mlrb/mlrb/internal/results/review"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/gpucost"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// Complete adds to a run's result what only the store knows, and the
// workflow never holds: its research measures, derived from its
// attempts' stored observations, its GPU dollars (with the cost at each
// mark) at prices (nil: not costed), and a reviewer's latest verdict.
// It is the one place a result is completed: the worker does it as it
// stores a result, the starter for a result read from Temporal. A
// verdict that cannot be read is an error, never a result stored
// without it (a hacked run would count again).
func Complete(ctx context.Context, s blob.Store, r *runs.Result, prices *gpucost.Table, minExperiment time.Duration) error {
	obs, err := observe.Load(ctx, s, r.RunID)
	if err != nil {
		obs = nil // the measures are left out, the result kept
	}
	if len(obs) > 0 {
		research := Research(r, obs, minExperiment)
		r.Research = &research.Measures
	}
	if prices != nil {
		PriceGPUs(r, prices, obs)
		if err != nil {
			// The marks' LLM dollars are not known: not costed, never
			// costed at the GPUs alone (equal spend would see them free).
			for i := range r.Curve {
				r.Curve[i].CostUSD = nil
			}
		}
	}
	// A verdict given before the run was stored again (a resumed
	// benchmark's) still counts.
	_, err = CurrentVerdict(ctx, s, r)
	return err
}

// CurrentVerdict puts the run's latest verdict on r where it is not
// there already (a result stored again as a verdict was given lost it)
// and tells whether it changed r. Every reader of stored results goes
// through it: the verdicts under review/ are the record, result.json
// their copy.
func CurrentVerdict(ctx context.Context, s blob.Store, r *runs.Result) (bool, error) {
	v, err := review.Latest(ctx, s, r.RunID)
	if err != nil {
		return false, fmt.Errorf("the latest verdict on %s: %w", r.RunID, err)
	}
	if sameVerdict(r.Review, v) {
		return false, nil
	}
	runs.Apply(r, v)
	return true, nil
}

func sameVerdict(a, b *runs.Verdict) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Verdict == b.Verdict && a.By == b.By && a.At.Equal(b.At) && a.Note == b.Note
}

// Research is the run's experiments and measures, derived from its
// attempts' observations: a model is scored by the final evaluation
// when it is the final checkpoint's, else by the mark that fell on its
// checkpoint.
func Research(r *runs.Result, obs []*observe.Observation, minExperiment time.Duration) observe.Research {
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

// PriceGPUs sets the result's GPU dollars (its billed GPU-hours at the
// table's rate for its GPU type; a CPU run's are 0) and each mark's
// cumulative cost: the GPUs for the agent time by then, and the LLM
// calls the observations saw end by then. A GPU type the table does not
// price leaves them unset.
func PriceGPUs(r *runs.Result, t *gpucost.Table, obs []*observe.Observation) {
	gpus, typ := runs.ParseHardware(r.Hardware)
	rate := 0.0
	if gpus > 0 {
		ref, ok := t.Rate(typ)
		if !ok {
			return
		}
		rate, r.Cost.GPUPrices = ref.USDPerGPUHour, &ref
	}
	usd := r.Cost.BilledGPUHours * rate
	r.Cost.GPUUSD = &usd
	type call struct{ at, usd float64 }
	var calls []call
	for _, o := range obs {
		for _, c := range o.Calls {
			calls = append(calls, call{o.AgentAt(c.End), c.USD})
		}
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].at < calls[j].at })
	for i := range r.Curve {
		m := &r.Curve[i]
		spent := rate * float64(gpus) * m.AtS / 3600
		for _, c := range calls {
			if c.at > m.AtS {
				break
			}
			spent += c.usd
		}
		m.CostUSD = &spent
	}
}
