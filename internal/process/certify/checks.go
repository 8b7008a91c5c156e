// Certify's checks: what each scenario left in the store, read as evidence.

package certify

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/app"
	"github.com/mlrb/mlrb/internal/results/certificate"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// evidence reads what the scenario runs left in the store.
type evidence struct {
	store blob.Store
	cfg   *config.Config
}

func (e *evidence) engine() *checkpoint.Engine {
	return app.Engine(e.store, e.cfg)
}

// manifests are a run's checkpoints, oldest first.
func (e *evidence) manifests(ctx context.Context, run string) []*checkpoint.Manifest {
	ms, _ := e.engine().List(ctx, run)
	return ms
}

func final(ms []*checkpoint.Manifest) *checkpoint.Manifest {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Final {
			return ms[i]
		}
	}
	return nil
}

// file is a manifest's entry for rel, a path under its work dir.
func file(m *checkpoint.Manifest, rel string) *checkpoint.File {
	p := path.Join(m.Workdir, rel)
	for i := range m.Files {
		if m.Files[i].Path == p {
			return &m.Files[i]
		}
	}
	return nil
}

func (e *evidence) llmCalls(ctx context.Context, run string) []transcript.Call {
	calls, _ := transcript.List(ctx, e.store, run, 0)
	return transcript.Replayed(calls)
}

// plain: a model, submission.json, and usage.json when the agent called
// an LLM, in the final checkpoint; nothing written outside the
// workspace (where the runtime can tell).
func (e *evidence) plain(ctx context.Context, res *runs.Result) certificate.Check {
	ch := certificate.Check{Name: "plain", Run: res.RunID}
	fin := final(e.manifests(ctx, res.RunID))
	if (res.Outcome != runs.OutcomeScored && res.Outcome != runs.OutcomeLimitReached) || res.Score == nil || fin == nil {
		ch.Status, ch.Summary = certificate.Fail, fmt.Sprintf("the run ended %s: %s", res.Outcome, res.Reason)
		return ch
	}
	key := checkpoint.ManifestKey(res.RunID, fin.Seq)
	ch.Evidence = append(ch.Evidence, key)
	var missing []string
	want := []string{path.Join(contract.OutputDir, contract.SubmissionFile)}
	if calls := e.llmCalls(ctx, res.RunID); len(calls) > 0 {
		want = append(want, path.Join(contract.OutputDir, contract.UsageFile))
	}
	for _, w := range want {
		if file(fin, w) == nil {
			missing = append(missing, w)
		}
	}
	outside := e.outside(ctx, res)
	switch {
	case len(missing) > 0:
		ch.Status, ch.Summary = certificate.Fail, fmt.Sprintf("scored, but the final checkpoint #%d holds no %s (the contract's files)", fin.Seq, strings.Join(missing, ", "))
	case len(outside) > 0:
		ch.Status = certificate.Fail
		ch.Summary = fmt.Sprintf("wrote outside the workspace and its declared state paths: %s", strings.Join(outside[:min(len(outside), 5)], ", "))
		ch.Evidence = append(ch.Evidence, outside...)
	default:
		ch.Status = certificate.Pass
		ch.Summary = fmt.Sprintf("scored %s with %s in the final checkpoint #%d", score(res), strings.Join(want, " and "), fin.Seq)
	}
	return ch
}

// outside are the paths the run's attempts wrote outside the workspace,
// as the runtime recorded them.
func (e *evidence) outside(ctx context.Context, res *runs.Result) []string {
	var out []string
	for _, a := range res.AttemptLog {
		b, err := blob.ReadAll(ctx, e.store, activities.WritesKey(res.RunID, a.N), 1<<20)
		if err != nil {
			continue
		}
		var w activities.AttemptWrites
		if json.Unmarshal(b, &w) == nil {
			out = append(out, w.Outside...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func score(res *runs.Result) string {
	if res.Score == nil {
		return "-"
	}
	return fmt.Sprintf("%.4f", *res.Score)
}

func lastAttempt(res *runs.Result) runs.AttemptRecord {
	if len(res.AttemptLog) == 0 {
		return runs.AttemptRecord{}
	}
	return res.AttemptLog[len(res.AttemptLog)-1]
}

// sigterm: the agent still working at its soft deadline got SIGTERM
// and left its submission within the grace, exiting on its own; one
// that stopped before it (its own reading of the deadline) left its
// submission. unhurried is the agent time it takes with a far deadline
// (the plain run's): one done before the SIGTERM comes is not tested.
func (e *evidence) sigterm(ctx context.Context, res *runs.Result, unhurried float64, limit, grace time.Duration) certificate.Check {
	ch := certificate.Check{Name: "sigterm", Run: res.RunID}
	a := lastAttempt(res)
	g := min(grace, limit/4)
	soft := (limit - g).Seconds()
	ch.Figures = map[string]float64{"agent_s": a.ToS, "sigterm_at_s": soft, "grace_s": g.Seconds(), "unhurried_s": unhurried}
	ch.Evidence = append(ch.Evidence, fmt.Sprintf("attempt %d: %s (%s) at %.1f s; SIGTERM due at %.0f s, the kill %s later", a.N, a.End, a.Detail, a.ToS, soft, g))
	fin := final(e.manifests(ctx, res.RunID))
	submitted := fin != nil && file(fin, path.Join(contract.OutputDir, contract.SubmissionFile)) != nil
	if fin != nil {
		ch.Evidence = append(ch.Evidence, checkpoint.ManifestKey(res.RunID, fin.Seq))
	}
	switch {
	case a.End == "exited" && unhurried < soft:
		ch.Status, ch.Summary = certificate.NotApplicable, fmt.Sprintf("the agent is done in %.1f s unhurried, before the SIGTERM at %.0f s", unhurried, soft)
	case a.End != "exited" && a.End != "deadline":
		ch.Status, ch.Summary = certificate.Fail, fmt.Sprintf("the attempt ended %s (%s), not at its deadline", a.End, a.Detail)
	case strings.HasPrefix(a.Detail, activities.KilledAfterGrace):
		ch.Status, ch.Summary = certificate.Fail, fmt.Sprintf("ignored SIGTERM: killed %s after it, at the hard deadline (agent.grace, at most a quarter of the budget)", g)
	case !submitted:
		ch.Status, ch.Summary = certificate.Fail, "stopped at its deadline without output/submission.json in its final checkpoint"
	case a.End == "exited":
		ch.Status, ch.Summary = certificate.Pass, fmt.Sprintf("stopped on its own at %.1f s, before the SIGTERM at %.0f s, with its submission in the final checkpoint #%d", a.ToS, soft, fin.Seq)
	default:
		ch.Status = certificate.Pass
		ch.Summary = fmt.Sprintf("exited within %s of SIGTERM (at %.1f s) with its submission in the final checkpoint #%d; scored %s", g, a.ToS, fin.Seq, score(res))
	}
	return ch
}

// extend: with the deadline extended while it ran, an agent that works
// past the original deadline when unhurried (the plain run) worked past
// it: it reads MLRB_DEADLINE_FILE, not only its start's deadline.
func (e *evidence) extend(_ context.Context, res *runs.Result, unhurried float64, limit time.Duration, extendErr error) certificate.Check {
	ch := certificate.Check{Name: "extend", Run: res.RunID}
	a := lastAttempt(res)
	used, orig := res.Budget.UsedS, limit.Seconds()
	ch.Figures = map[string]float64{"agent_s": used, "original_deadline_s": orig, "granted_s": res.Budget.GrantedS(), "unhurried_s": unhurried}
	ch.Evidence = append(ch.Evidence, fmt.Sprintf("attempt %d: %s (%s) at %.1f s; granted %.0f s; %.1f s unhurried (the plain run)", a.N, a.End, a.Detail, used, res.Budget.GrantedS(), unhurried))
	const margin = 0.5
	switch {
	case extendErr != nil:
		ch.Status, ch.Summary = certificate.NotApplicable, fmt.Sprintf("the run could not be extended while it ran: %v", extendErr)
	case used > orig+margin:
		ch.Status, ch.Summary = certificate.Pass, fmt.Sprintf("worked to %.1f s, past the original deadline of %.0f s", used, orig)
	case unhurried <= orig+margin:
		ch.Status, ch.Summary = certificate.NotApplicable, fmt.Sprintf("the agent is done in %.1f s unhurried, before the original deadline of %.0f s", unhurried, orig)
	default:
		ch.Status = certificate.Fail
		ch.Summary = fmt.Sprintf("stopped at %.1f s, by the original deadline (%.0f s), though extended while it ran and %.1f s of work unhurried: it does not read MLRB_DEADLINE_FILE", used, orig, unhurried)
	}
	return ch
}
