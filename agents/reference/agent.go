// The reference agent's search over the mini tasks' models, resumed from its trials; the no-op and idle agents.

// Package reference is mlrb's reference agent of the mini suite (no LLM):
// a search over the task's models from simple to rich, keeping the best
// in output/model, resumed from the trials its workspace holds; and the
// no-op and idle agents. It builds models with the reference evaluator's
// code (internal/scoring/reference) and never scores one on held-out data.
package reference

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
	mini "github.com/mlrb/mlrb/internal/scoring/reference"
	"github.com/mlrb/mlrb/tasks"
)

// trial is one point of the search, written to trials/trial-NNN.json.
type trial struct {
	N       int                `json:"n"`
	Config  map[string]float64 `json:"config"`
	Params  int64              `json:"params"`
	Valid   float64            `json:"validation"` // perplexity (lower is better) or mini.BLEU (higher)
	Skipped string             `json:"skipped,omitempty"`
	Attempt int                `json:"attempt"`
}

// Agent runs the research loop of one mini task.
type Agent struct {
	Spec *tasks.Spec
	Env  contract.Env
	Log  io.Writer
	// Sleep paces trials; tests shorten it.
	Sleep func(ctx context.Context, d time.Duration) error
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Run searches until the grid, the trial budget or the time runs out, or
// ctx ends (SIGTERM); the best model so far is always saved.
func (a *Agent) Run(ctx context.Context) error {
	ref := a.Spec.Reference
	if ref == nil {
		return fmt.Errorf("task %s is not a mini task: the reference agent only does the mini suite", a.Spec.ID)
	}
	if a.Sleep == nil {
		a.Sleep = sleepCtx
	}
	trialsDir := filepath.Join(a.Env.Workdir, "trials")
	if err := os.MkdirAll(trialsDir, 0o755); err != nil {
		return err
	}
	done, err := loadTrials(trialsDir)
	if err != nil {
		return err
	}
	a.logf("start attempt=%d resumed=%v trials_found=%d", a.Env.Attempt, a.Env.Resumed, len(done))
	if f := a.Env.ResumeFile; f != "" {
		// What the worker says was lost: the trials found are the rest.
		if n, err := contract.ReadResumeNote(f); err != nil {
			a.logf("resume note unreadable: %v", err)
		} else {
			a.logf("resume note: attempt %d after attempt %d (%s), checkpoint #%d at %.1f s of agent time, %.1f s lost past it, down %.1f s, %d process(es) were running",
				n.Attempt, n.LastAttempt, n.LastEnded, n.Checkpoint.Seq, n.Checkpoint.AgentS, n.LostAgentS, n.DownS, len(n.Running))
		}
	}
	if err := appendLine(filepath.Join(a.Env.Workdir, "starts.log"),
		fmt.Sprintf("attempt=%d resumed=%d trials_found=%d", a.Env.Attempt, b2i(a.Env.Resumed), len(done))); err != nil {
		return err
	}
	var search searcher
	switch ref.Kind {
	case "lm":
		search, err = newLMSearch(a.Spec, uint64(a.Env.Seed))
	case "translate":
		search = newTranslateSearch(a.Spec, uint64(a.Env.Seed))
	}
	if err != nil {
		return err
	}
	grid := search.grid()
	r := mini.Stream(uint64(a.Env.Seed), "search")
	r.Shuffle(len(grid), func(i, j int) { grid[i], grid[j] = grid[j], grid[i] })
	if len(grid) > ref.Trials {
		grid = grid[:ref.Trials]
	}
	// Simple models first, as research goes: a baseline, then richer
	// ones (the n-gram order), so that the run's curve shows progress.
	slices.SortStableFunc(grid, func(a, b map[string]float64) int { return cmp.Compare(a["order"], b["order"]) })
	best := bestOf(done, search.lowerIsBetter())
	pace := time.Duration(ref.TrialSeconds * float64(time.Second))
	for n := len(done); n < len(grid); n++ {
		if ctx.Err() != nil {
			a.logf("stopping on signal after %d trials", n)
			break
		}
		if d := a.Env.CurrentDeadline(); time.Until(d) < pace+500*time.Millisecond {
			a.logf("stopping: deadline %s is near", d.Format(time.RFC3339))
			break
		}
		t := trial{N: n, Config: grid[n], Attempt: a.Env.Attempt}
		model, valid, params, err := search.run(grid[n])
		if err != nil {
			return fmt.Errorf("trial %d: %w", n, err)
		}
		t.Valid, t.Params = valid, params
		if max := a.Spec.Constraints.MaxParams; max > 0 && params > max {
			t.Skipped = fmt.Sprintf("%d parameters exceed the limit of %d", params, max)
		} else if best == nil || better(valid, best.Valid, search.lowerIsBetter()) {
			if err := model.Save(filepath.Join(a.Env.OutputDir(), "model")); err != nil {
				return fmt.Errorf("save model: %w", err)
			}
			if err := mini.WriteJSON(filepath.Join(a.Env.OutputDir(), contract.SubmissionFile), contract.Submission{ModelPath: contract.OutputDir + "/model"}); err != nil {
				return err
			}
			tt := t
			best = &tt
		}
		if err := mini.WriteJSON(filepath.Join(trialsDir, fmt.Sprintf("trial-%03d.json", n)), t); err != nil {
			return err
		}
		a.logf("trial %d %v params=%d validation=%.4f %s", n, grid[n], params, valid, t.Skipped)
		if err := a.Sleep(ctx, pace); err != nil {
			continue // loop top sees ctx and stops
		}
	}
	if best == nil {
		return errors.New("no trial produced an admissible model")
	}
	a.logf("best trial %d validation=%.4f", best.N, best.Valid)
	return nil
}

func (a *Agent) logf(format string, args ...any) {
	if a.Log != nil {
		_, _ = fmt.Fprintf(a.Log, time.Now().UTC().Format(time.RFC3339)+" "+format+"\n", args...)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func loadTrials(dir string) ([]trial, error) {
	names, err := filepath.Glob(filepath.Join(dir, "trial-*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []trial
	for i, n := range names {
		var t trial
		if err := mini.ReadJSON(n, &t); err != nil {
			return nil, err
		}
		if t.N != i {
			break // a gap: resume from the first missing trial
		}
		out = append(out, t)
	}
	return out, nil
}

func better(a, b float64, lower bool) bool {
	if lower {
		return a < b
	}
	return a > b
}

func bestOf(ts []trial, lower bool) *trial {
	var best *trial
	for i := range ts {
		if ts[i].Skipped == "" && (best == nil || better(ts[i].Valid, best.Valid, lower)) {
			best = &ts[i]
		}
	}
	return best
}

type saver interface{ Save(dir string) error }

type searcher interface {
	grid() []map[string]float64
	run(cfg map[string]float64) (saver, float64, int64, error)
	lowerIsBetter() bool
}

// lmSearch searches n-gram models; how it builds one depends on what the
// task hands the agent.
type lmSearch struct {
	start      string
	train, dev [][]string
	base       *mini.NGram
	experts    []*mini.NGram
	large      *mini.NGram
	maxParams  int64
}

func newLMSearch(spec *tasks.Spec, seed uint64) (*lmSearch, error) {
	ref := spec.Reference
	l := mini.NewLanguage(seed)
	s := &lmSearch{start: ref.Start, maxParams: spec.Constraints.MaxParams}
	corpus := l.Corpus("train", ref.TrainSentences, nil)
	cut := len(corpus) * 9 / 10
	s.train, s.dev = corpus[:cut], corpus[cut:]
	switch ref.Start {
	case "base":
		general := l.Corpus("base", 4*ref.TrainSentences, &mini.Slice{Lo: 0, Hi: l.NounCount() * 6 / 10})
		s.base = mini.Train(general, 3, 0.8)
	case "experts":
		for i, sl := range l.ExpertSlices(3) {
			s.experts = append(s.experts, mini.Train(l.Corpus(fmt.Sprintf("expert-%d", i), ref.TrainSentences, &sl), 4, 0.8))
		}
	case "large":
		s.large = mini.Train(l.Corpus("large", 2*ref.TrainSentences, nil), 5, 0.8)
	case "scratch":
	default:
		return nil, fmt.Errorf("unknown start %q", ref.Start)
	}
	return s, nil
}

func (s *lmSearch) lowerIsBetter() bool { return true }

func (s *lmSearch) grid() []map[string]float64 {
	var g []map[string]float64
	lambdas := []float64{0.5, 0.8, 0.95}
	switch s.start {
	case "scratch":
		for o := 1; o <= 5; o++ {
			for _, l := range lambdas {
				for _, p := range []float64{1, 2, 3, 5} {
					g = append(g, map[string]float64{"order": float64(o), "lambda": l, "prune": p})
				}
			}
		}
	case "base":
		for o := 1; o <= 4; o++ {
			for _, l := range lambdas {
				for _, w := range []float64{0, 1, 3, 10} {
					g = append(g, map[string]float64{"order": float64(o), "lambda": l, "in_domain_weight": w})
				}
			}
		}
	case "experts":
		ws := []float64{0.5, 1, 2}
		for _, a := range ws {
			for _, b := range ws {
				for _, c := range ws {
					for _, l := range lambdas {
						g = append(g, map[string]float64{"w0": a, "w1": b, "w2": c, "lambda": l})
					}
				}
			}
		}
	case "large":
		for o := 1; o <= 5; o++ {
			for _, l := range lambdas {
				for _, p := range []float64{1, 2, 3, 5, 8} {
					g = append(g, map[string]float64{"order": float64(o), "lambda": l, "prune": p})
				}
			}
		}
	}
	return g
}

func (s *lmSearch) run(c map[string]float64) (saver, float64, int64, error) {
	var m *mini.NGram
	switch s.start {
	case "scratch":
		m = mini.Train(s.train, int(c["order"]), c["lambda"]).Prune(int(c["prune"]))
	case "base":
		// Adapting = continuing to count on in-domain data, weighted.
		inDomain := mini.Train(s.train, 3, c["lambda"])
		m = mini.Merge([]*mini.NGram{s.base, inDomain}, []float64{1, c["in_domain_weight"]}, c["lambda"]).Truncate(int(c["order"]))
	case "experts":
		m = mini.Merge(s.experts, []float64{c["w0"], c["w1"], c["w2"]}, c["lambda"])
	case "large":
		m = s.large.Truncate(int(c["order"])).Prune(int(c["prune"]))
		m.Lambda = c["lambda"]
	}
	ppl := m.Perplexity(s.dev)
	if math.IsNaN(ppl) || math.IsInf(ppl, 0) {
		return nil, 0, 0, fmt.Errorf("perplexity %v", ppl)
	}
	return m, ppl, m.Params(), nil
}

type translateSearch struct{ train, dev []mini.Pair }

func newTranslateSearch(spec *tasks.Spec, seed uint64) *translateSearch {
	pairs := mini.NewArith(seed).Pairs("train", spec.Reference.TrainSentences)
	cut := len(pairs) * 9 / 10
	return &translateSearch{train: pairs[:cut], dev: pairs[cut:]}
}

func (s *translateSearch) lowerIsBetter() bool { return false }

func (s *translateSearch) grid() []map[string]float64 {
	var g []map[string]float64
	for t := 0.05; t < 0.95; t += 0.075 {
		for _, d := range []float64{0, 1} {
			g = append(g, map[string]float64{"threshold": math.Round(t*1000) / 1000, "dedup": d})
		}
	}
	return g
}

func (s *translateSearch) run(c map[string]float64) (saver, float64, int64, error) {
	lex := mini.TrainLexicon(s.train, c["threshold"], c["dedup"] == 1)
	sum := 0.0
	for _, p := range s.dev {
		sum += mini.BLEU(lex.Translate(p.Informal), p.Formal)
	}
	return lex, sum / float64(len(s.dev)), lex.Params(), nil
}

// Noop submits an untrained model at once: the baseline for measuring
// what the orchestration itself costs.
func Noop(spec *tasks.Spec, env contract.Env) error {
	if err := mini.Untrained(spec, filepath.Join(env.OutputDir(), "model")); err != nil {
		return err
	}
	return mini.WriteJSON(filepath.Join(env.OutputDir(), contract.SubmissionFile), contract.Submission{ModelPath: contract.OutputDir + "/model"})
}

// Idle is the no-op agent that keeps its whole budget: it submits an
// untrained model at once, then does nothing until ctx ends (the soft
// deadline's SIGTERM), so that its run lasts its budget, less the grace,
// whatever the machine's speed. It holds runs in flight for load and
// campaign tests.
func Idle(ctx context.Context, spec *tasks.Spec, env contract.Env) error {
	if err := Noop(spec, env); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
