// How a run ends: its verdict made the result.

package workflows

import (
	"encoding/json"
	"maps"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/agents"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// verdict is how a run ends, as the part that decided says: its outcome,
// why (when the outcome's name does not say), and its final model's
// evaluation, when it was scored.
type verdict struct {
	outcome runs.Outcome
	reason  string
	ev      *activities.EvalResult
}

// part is one of the run's parts: it writes its share of the result.
type part interface{ result(*runs.Result) }

// finish ends the run on its verdict: its result, the run's own fields
// and then each part's share (attempts, evaluations, curve, checkpoints,
// people, slots held, LLM usage).
func (r *runState) finish(ctx workflow.Context, v verdict) *runs.Result {
	outcome, reason, ev := v.outcome, v.reason, v.ev
	disqualified := ev != nil && len(ev.Violations) > 0 && r.env.version(ctx, versionDisqualify) == 1
	if disqualified {
		outcome, reason = runs.OutcomeDisqualified, "the model breaks the task's rules: "+strings.Join(ev.Violations, "; ")
	}
	r.slots.releaseScoring(ctx)
	r.st.Outcome = outcome
	sas := []temporal.SearchAttributeUpdate{SAOutcome.ValueSet(string(outcome))}
	if r.env.isLean() {
		// One upsert: the phase and the outcome together.
		r.st.Phase = runs.PhaseDone
		sas = append(sas, SAPhase.ValueSet(string(runs.PhaseDone)))
	} else {
		r.setPhase(ctx, runs.PhaseDone)
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, sas...); err != nil {
		workflow.GetLogger(ctx).Warn("upsert outcome", "error", err)
	}
	res := &runs.Result{
		RunID: r.st.RunID, Task: r.in.Task, Agent: r.in.Agent, Seed: r.in.Seed, Outcome: outcome,
		Attempts: r.st.Attempt, Checkpoints: r.st.Checkpoints, SpecHash: r.spec.Hash, Budget: r.st.Budget, Reason: reason,
		Metrics: map[string]float64{}, AgentDef: r.agentRef(), Benchmark: r.in.Benchmark,
	}
	if r.spec.Hash != "" { // resolved
		res.TimeLimitS, res.Hardware = r.timeLimit().Seconds(), runs.HardwareClass(r.spec.Spec.Resources.GPUCount, r.spec.Spec.Resources.GPUType)
	}
	res.Cost = costOf(r.st.Budget, r.spec.Spec.Resources.GPUCount, ev)
	for _, p := range []part{&r.loop, &r.eval, &r.curve, &r.intake, &r.person, &r.slots, &r.usage} {
		p.result(res)
	}
	if ev != nil {
		score := ev.Score
		res.Score, res.Metrics, res.ModelPath, res.Violations, res.Flags, res.Provenance = &score, ev.Metrics, ev.ModelPath, ev.Violations, ev.Flags, ev.Provenance
		res.EvaluatorImage, res.ImageCopies, res.ImageNotCompared = ev.Image, ev.ImageCopies, ev.ImageNotCompared
		r.st.Score = &score
	}
	if disqualified {
		m := maps.Clone(res.Metrics)
		if m == nil {
			m = map[string]float64{}
		}
		m[runs.DisqualifiedScore] = *res.Score
		res.Metrics = m
		res.Score, r.st.Score = nil, nil
	}
	return res
}

// storeResult keeps the result in the blob store, where leaderboards of
// benchmarks of any size read it. A store down for the activity's whole
// retry budget loses only that copy: the result is still the
// workflow's, and the leaderboard counts the run missing.
func (r *runState) storeResult(ctx workflow.Context, res *runs.Result) {
	b, err := json.Marshal(res)
	if err != nil {
		workflow.GetLogger(ctx).Error("encode result", "error", err)
		return
	}
	in := activities.StoreResultInput{RunID: res.RunID, Result: b}
	if err := storeResult.run(ctx, r.env, callArgs{}, in); err != nil {
		workflow.GetLogger(ctx).Error("result not stored", "error", err)
	}
}

// agentRef is what the result records of the run's agent.
func (r *runState) agentRef() *runs.AgentRef {
	digest := r.loop.image
	if digest == "" {
		digest = r.spec.AgentImage
	}
	ref := agents.Of(r.in.AgentDef, r.in.Agent, r.in.Image, r.in.LLMProvider).Ref(digest)
	return &ref
}
