// resume: after the crash, whether the agent went on from what was restored, measured.

package certify

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/results/certificate"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// resume: after the crash, whether the agent went on from what was
// restored, measured: LLM calls it made again that the checkpoint had
// answers to, files it rewrote that were restored unchanged, and the
// agent time it took to be back where it was.
func (e *evidence) resume(ctx context.Context, res *runs.Result, atCrash *checkpoint.Manifest) certificate.Check {
	ch := certificate.Check{Name: "resume", Run: res.RunID}
	if atCrash == nil && len(res.AttemptLog) == 1 && res.AttemptLog[0].End != "lost" {
		ch.Status = certificate.NotApplicable
		ch.Summary = fmt.Sprintf("the agent ended (%s) before its second checkpoint, at %.1f s: no crash could take it; give it more work", res.AttemptLog[0].End, res.AttemptLog[0].ToS)
		return ch
	}
	if len(res.AttemptLog) < 2 || res.AttemptLog[0].End != "lost" {
		ch.Status, ch.Summary = certificate.Fail, fmt.Sprintf("the crash did not lose the attempt (%d attempts): the run was not resumed", len(res.AttemptLog))
		return ch
	}
	first, second := res.AttemptLog[0], res.AttemptLog[1]
	ms := e.manifests(ctx, res.RunID)
	restored, after := restoredAndAfter(ms, first.N, second.N)
	if atCrash != nil && atCrash.Attempt == first.N {
		restored = atCrash
	}
	if restored == nil || after == nil {
		var have []string
		for _, m := range ms {
			have = append(have, fmt.Sprintf("#%d of attempt %d", m.Seq, m.Attempt))
		}
		ch.Status = certificate.Fail
		ch.Summary = fmt.Sprintf("the run has no checkpoint of the lost attempt %d and one of the resumed attempt %d to compare (it has %s)", first.N, second.N, strings.Join(have, ", "))
		return ch
	}
	rewritten, regular := rewrittenUnchanged(restored, after)
	again, lastCall := e.callsAgain(ctx, res.RunID, first.N, second.N, restored)
	// Back where it was: the last repeat, a call made again or a file
	// written again, after the resumed attempt got its lease.
	last := lastCall
	for _, f := range after.Files {
		if t := time.Unix(0, f.MTime); slices.Contains(rewritten, f.Path) && t.After(last) {
			last = t
		}
	}
	back := 0.0
	if !last.IsZero() && last.After(second.LeasedAt) {
		back = last.Sub(second.LeasedAt).Seconds()
	}
	ch.Figures = map[string]float64{"lost_agent_s": res.Budget.LostS, "calls_made_again": float64(len(again)), "back_where_it_was_s": back,
		"files_rewritten_unchanged": float64(len(rewritten)), "files_restored": float64(regular), "resumed_from_s": second.FromS}
	ch.Evidence = append(ch.Evidence, checkpoint.ManifestKey(res.RunID, restored.Seq), checkpoint.ManifestKey(res.RunID, after.Seq),
		fmt.Sprintf("attempt %d: lost (%s) at %.1f s; attempt %d from %.1f s", first.N, first.Detail, first.ToS, second.N, second.FromS))
	for _, p := range rewritten[:min(len(rewritten), 5)] {
		ch.Evidence = append(ch.Evidence, "rewritten unchanged: "+p)
	}
	ch.Evidence = append(ch.Evidence, again[:min(len(again), 5)]...)
	switch {
	case len(again) > 0:
		ch.Status = certificate.Fail
		ch.Summary = fmt.Sprintf("made %d LLM call(s) again that the restored checkpoint #%d had the answers to: it does not resume its conversation", len(again), restored.Seq)
	case len(rewritten) >= 3 && len(rewritten)*4 >= regular:
		ch.Status = certificate.Fail
		ch.Summary = fmt.Sprintf("rewrote %d of the %d files checkpoint #%d restored, unchanged: it starts over on a restored workspace (%.1f s to be back where it was)", len(rewritten), regular, restored.Seq, back)
	default:
		ch.Status = certificate.Pass
		ch.Summary = fmt.Sprintf("went on from checkpoint #%d (%.1f s): no call made again, %d of %d restored files rewritten unchanged; %.1f s of agent work lost to the crash; scored %s",
			restored.Seq, second.FromS, len(rewritten), regular, res.Budget.LostS, score(res))
	}
	return ch
}

// restoredAndAfter are the lost attempt's last checkpoint (what the
// resumed attempt got) and the resumed attempt's last.
func restoredAndAfter(ms []*checkpoint.Manifest, lost, resumed int) (restored, after *checkpoint.Manifest) {
	for _, m := range ms {
		switch m.Attempt {
		case lost:
			restored = m
		case resumed:
			after = m
		}
	}
	return restored, after
}

// rewrittenUnchanged are the regular files of restored that after holds
// with the same bytes but written again (another mtime).
func rewrittenUnchanged(restored, after *checkpoint.Manifest) ([]string, int) {
	now := map[string]checkpoint.File{}
	for _, f := range after.Files {
		now[f.Path] = f
	}
	var out []string
	regular := 0
	for _, f := range restored.Files {
		if !f.Mode.IsRegular() || f.Mode&fs.ModeType != 0 || f.Size == 0 {
			continue
		}
		regular++
		g, ok := now[f.Path]
		if ok && g.MTime != f.MTime && slices.Equal(g.Chunks, f.Chunks) {
			out = append(out, f.Path)
		}
	}
	slices.Sort(out)
	return out, regular
}

// callsAgain are the resumed attempt's LLM calls whose request is one the
// lost attempt made before the restored checkpoint: answers the
// checkpoint held, paid for again.
func (e *evidence) callsAgain(ctx context.Context, run string, lost, resumed int, restored *checkpoint.Manifest) ([]string, time.Time) {
	var before [][]byte
	var out []string
	var last time.Time
	for _, c := range e.llmCalls(ctx, run) {
		body, err := transcript.ReadBody(ctx, e.store, run, c.Request)
		if err != nil {
			continue
		}
		switch {
		case c.Attempt == lost && !c.Start.After(restored.CreatedAt):
			before = append(before, body)
		case c.Attempt == resumed:
			if slices.ContainsFunc(before, func(b []byte) bool { return transcript.Differs(b, body) == "" }) {
				out = append(out, fmt.Sprintf("call made again: attempt %d seq %d (%s)", c.Attempt, c.Seq, c.API))
				last = c.Start
			}
		}
	}
	return out, last
}

// providers are the hosts an LLM call reaches around the gateway.
var providers = []string{"api.openai.com", "api.anthropic.com"}

// sandbox: the agent ran as a user other than root, with no way out but
// the door, and made its LLM calls through the gateway only.
func (e *evidence) sandbox(ctx context.Context, res *runs.Result) certificate.Check {
	ch := certificate.Check{Name: "sandbox", Run: res.RunID}
	key := activities.PolicyKey(res.RunID, 1)
	b, err := blob.ReadAll(ctx, e.store, key, 1<<20)
	var p activities.AttemptPolicy
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		ch.Status, ch.Summary = certificate.Fail, fmt.Sprintf("the run's sandbox policy (%s) is unreadable: %v", key, err)
		return ch
	}
	ch.Evidence = append(ch.Evidence, key)
	if p.Sandbox.Runtime != "docker" {
		ch.Status, ch.Summary = certificate.NotApplicable, fmt.Sprintf("host.runtime %s has no sandbox: certify an image agent under host.runtime docker", p.Sandbox.Runtime)
		return ch
	}
	calls, _ := transcript.List(ctx, e.store, res.RunID, 0)
	var refused, around []string
	for _, c := range calls {
		if c.Kind != transcript.KindConnect {
			continue
		}
		host, _, _ := strings.Cut(c.Host, ":")
		switch {
		case slices.Contains(providers, host):
			around = append(around, fmt.Sprintf("connect %s (seq %d)", c.Host, c.Seq))
		case c.Error != "" || c.Status >= 400:
			refused = append(refused, fmt.Sprintf("connect %s refused (seq %d): %s", c.Host, c.Seq, c.Error))
		}
	}
	user := p.Sandbox.User
	switch {
	case user == "" || user == "0" || user == "root" || strings.HasPrefix(user, "0:") || strings.HasPrefix(user, "root:"):
		ch.Status, ch.Summary = certificate.Fail, fmt.Sprintf("ran as %q: root in its container", user)
	case p.Sandbox.Network != "door" && p.Sandbox.Network != "none":
		ch.Status, ch.Summary = certificate.Fail, fmt.Sprintf("its network was %q, not the door", p.Sandbox.Network)
	case len(around) > 0:
		ch.Status, ch.Summary, ch.Evidence = certificate.Fail, "tried to reach a provider around the gateway: "+around[0], append(ch.Evidence, around...)
	case len(refused) > 0:
		ch.Status, ch.Summary, ch.Evidence = certificate.Fail, "tried connections the door refused: "+refused[0], append(ch.Evidence, refused...)
	default:
		ch.Status = certificate.Pass
		ch.Summary = fmt.Sprintf("ran as %s with network %s; every connection went through the door, every LLM call through the gateway", user, p.Sandbox.Network)
	}
	return ch
}
