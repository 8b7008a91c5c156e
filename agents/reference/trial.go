// The reference agents' search: trials of the mini tasks' models.

package reference

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/tasks"
)

// newSearch is the task's search: what its models are built from.
func newSearch(spec *tasks.Spec, seed uint64) (searcher, error) {
	if spec.Reference == nil {
		return nil, fmt.Errorf("task %s is not a mini task", spec.ID)
	}
	if spec.Reference.Kind == "translate" {
		return newTranslateSearch(spec, seed), nil
	}
	return newLMSearch(spec, seed)
}

// TrialKeys are the settings a mini task's models take, with the first
// of its grid as their defaults, and the number of settings its grid has.
func TrialKeys(spec *tasks.Spec, seed uint64) (map[string]float64, int, error) {
	s, err := newSearch(spec, seed)
	if err != nil {
		return nil, 0, err
	}
	g := s.grid()
	return maps.Clone(g[0]), len(g), nil
}

// TrialResult is one model trained and measured on the agent's own
// validation split (cut from its training data, never the held-out one).
type TrialResult struct {
	Validation    float64
	LowerIsBetter bool
	Params        int64
}

// Trial trains one model of a mini task with cfg over the defaults
// (TrialKeys), saves it in dir, and measures it: the tool an agent of
// the mini suite trains with (`mlrb-agent train`).
func Trial(spec *tasks.Spec, seed uint64, cfg map[string]float64, dir string) (TrialResult, error) {
	s, err := newSearch(spec, seed)
	if err != nil {
		return TrialResult{}, err
	}
	set := maps.Clone(s.grid()[0])
	for k, v := range cfg {
		if _, ok := set[k]; !ok {
			return TrialResult{}, fmt.Errorf("setting %q: task %s's models take %s", k, spec.ID, strings.Join(slices.Sorted(maps.Keys(set)), ", "))
		}
		set[k] = v
	}
	m, valid, params, err := s.run(set)
	if err != nil {
		return TrialResult{}, fmt.Errorf("train: %w", err)
	}
	if err := m.Save(dir); err != nil {
		return TrialResult{}, fmt.Errorf("save the model: %w", err)
	}
	return TrialResult{Validation: valid, LowerIsBetter: s.lowerIsBetter(), Params: params}, nil
}
