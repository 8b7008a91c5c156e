// Package lmeval reads and writes results files in the shape
// lm-evaluation-harness 0.4 writes with --output_path, and turns them into
// a task's headline score.
package lmeval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mlrb/mlrb/tasks"
)

// Results is the part of an lm-eval results file mlrb reads.
type Results struct {
	Results  map[string]map[string]any `json:"results"`
	Groups   map[string]map[string]any `json:"groups,omitempty"`
	Config   map[string]any            `json:"config,omitempty"`
	NSamples map[string]map[string]int `json:"n-samples,omitempty"`
	Date     float64                   `json:"date,omitempty"`
}

// Write stores results as results_<date>.json under dir, as lm-eval does.
func Write(dir string, r *Results, now time.Time) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("lm-eval results: %w", err)
	}
	r.Date = float64(now.Unix())
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", fmt.Errorf("lm-eval results: %w", err)
	}
	p := filepath.Join(dir, "results_"+now.UTC().Format("2006-01-02T15-04-05.000000")+".json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return "", fmt.Errorf("lm-eval results: %w", err)
	}
	return p, nil
}

// Find returns the newest results_*.json anywhere under dir (lm-eval nests
// it under a directory named after the model).
func Find(dir string) (string, error) {
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), "results") && strings.HasSuffix(d.Name(), ".json") {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("find lm-eval results in %s: %w", dir, err)
	}
	if len(found) == 0 {
		return "", fmt.Errorf("no results_*.json under %s: the evaluator wrote no results", dir)
	}
	sort.Slice(found, func(i, j int) bool { return filepath.Base(found[i]) < filepath.Base(found[j]) })
	return found[len(found)-1], nil
}

// Read parses a results file.
func Read(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lm-eval results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("lm-eval results %s: not valid JSON: %w", path, err)
	}
	if len(r.Results) == 0 {
		return nil, fmt.Errorf("lm-eval results %s: no \"results\" section", path)
	}
	return &r, nil
}

// Value reads results.<task>.<field>, falling back to groups.<task>.
func (r *Results) Value(task, field string) (float64, error) {
	for _, sec := range []map[string]map[string]any{r.Results, r.Groups} {
		if t, ok := sec[task]; ok {
			v, ok := t[field]
			if !ok {
				return 0, fmt.Errorf("results.%s has no field %q", task, field)
			}
			f, ok := v.(float64)
			if !ok {
				return 0, fmt.Errorf("results.%s.%q is %v, not a number", task, field, v)
			}
			if math.IsNaN(f) {
				return 0, fmt.Errorf("results.%s.%q is NaN", task, field)
			}
			return f, nil
		}
	}
	return 0, fmt.Errorf("results have no task %q", task)
}

// ErrNoScore means the results do not hold the task's metric.
var ErrNoScore = errors.New("results do not hold the metric")

// Score computes a task's headline score and returns every metric read.
// The score aggregates the metric's parts (metric.aggregate): one part,
// or the unweighted mean of several. That mean is the SuperGLUE score of
// mini_pile and edge_llm_training (boolq, cb, copa, multirc, record,
// sglue_rte, wic, wsc): lm-eval's super-glue-lm-eval-v1 has no aggregate
// of its own.
func Score(r *Results, m tasks.Metric) (float64, map[string]float64, error) {
	metrics := map[string]float64{}
	for task, fields := range r.Results {
		for f, v := range fields {
			if x, ok := v.(float64); ok && !strings.Contains(f, "stderr") {
				metrics[task+"/"+f] = x
			}
		}
	}
	sum := 0.0
	for _, p := range m.Parts {
		v, err := r.Value(p.Task, p.Field)
		if err != nil {
			return 0, metrics, fmt.Errorf("%w: %s: %v", ErrNoScore, m.Name, err)
		}
		sum += v
	}
	score := sum / float64(len(m.Parts))
	metrics[m.Name] = score
	return score, metrics, nil
}
