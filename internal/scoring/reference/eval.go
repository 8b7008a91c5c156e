package reference

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/scoring/lmeval"
	"github.com/mlrb/mlrb/tasks"
)

// Evaluate scores the model in modelDir on held-out items of split
// generated from the seed, as lm-eval style results.
func Evaluate(spec *tasks.Spec, seed uint64, modelDir, split string) (*lmeval.Results, error) {
	purpose := "eval"
	switch split {
	case contract.SplitTest, "":
	case contract.SplitDev:
		purpose = "dev"
	default:
		return nil, fmt.Errorf("split %q: want %s or %s", split, contract.SplitTest, contract.SplitDev)
	}
	ref := spec.Reference
	if ref == nil {
		return nil, fmt.Errorf("task %s is not a mini task: the reference evaluator only scores the mini suite", spec.ID)
	}
	var cfg modelConfig
	if err := readJSON(filepath.Join(modelDir, "config.json"), &cfg); err != nil {
		return nil, fmt.Errorf("model %s: %w", modelDir, err)
	}
	res := &lmeval.Results{
		Results:  map[string]map[string]any{},
		NSamples: map[string]map[string]int{},
		Config:   map[string]any{"model": "mlrb-reference", "model_args": "pretrained=" + modelDir, "task": spec.ID, "seed": seed, "split": purpose},
	}
	switch ref.Kind {
	case "lm":
		if cfg.ModelType != "mlrb-ngram" {
			return nil, fmt.Errorf("model %s is a %q, task %s needs an n-gram language model", modelDir, cfg.ModelType, spec.ID)
		}
		m, err := LoadNGram(modelDir)
		if err != nil {
			return nil, err
		}
		l := NewLanguage(seed)
		for _, ph := range ref.Phenomena {
			items := l.Items(purpose, ph, ref.EvalItems)
			correct := 0
			for _, it := range items {
				bestI, bestLP := 0, math.Inf(-1)
				for i, c := range it.Choices {
					if lp := m.LogProb(c); lp > bestLP {
						bestI, bestLP = i, lp
					}
				}
				if bestI == it.Gold {
					correct++
				}
			}
			n := len(items)
			acc := float64(correct) / float64(n)
			name := "mlrb_" + ph
			res.Results[name] = map[string]any{"alias": name, "acc,none": acc, "acc_stderr,none": math.Sqrt(acc * (1 - acc) / float64(n-1))}
			res.NSamples[name] = map[string]int{"original": n, "effective": n}
		}
	case "translate":
		if cfg.ModelType != "mlrb-lexicon" {
			return nil, fmt.Errorf("model %s is a %q, task %s needs a lexicon", modelDir, cfg.ModelType, spec.ID)
		}
		lex, err := LoadLexicon(modelDir)
		if err != nil {
			return nil, err
		}
		pairs := NewArith(seed).Pairs(purpose, ref.EvalItems)
		var sum, sq float64
		checks := 0
		for _, p := range pairs {
			out := lex.Translate(p.Informal)
			b := BLEU(out, p.Formal)
			sum += b
			sq += b * b
			if Checks(out) {
				checks++
			}
		}
		n := float64(len(pairs))
		mean := sum / n
		std := math.Sqrt(math.Max(0, (sq-n*mean*mean)/(n-1)))
		res.Results["mlrb_autoformalization"] = map[string]any{
			"alias": "mlrb_autoformalization", "bleu,none": mean, "bleu_stderr,none": std / math.Sqrt(n),
			"compile,none": float64(checks) / n,
		}
		res.NSamples["mlrb_autoformalization"] = map[string]int{"original": len(pairs), "effective": len(pairs)}
	}
	return res, nil
}
