// lm-eval results read, and the task's score from them.

// Package lmeval reads and writes results files in the shape
// lm-evaluation-harness 0.4 writes with --output_path, and turns them into
// a task's headline score.
package lmeval

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
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
	// Provenance is what an mlrb evaluator says of what it scored against
	// (the held-out set's hash), kept in the run's result.
	Provenance map[string]string `json:"mlrb_provenance,omitempty"`
	// Measured is what the evaluator measured of the model on its GPU
	// (mlrb-peak-memory), when it had one.
	Measured *Measured `json:"mlrb_measured,omitempty"`
}

// Measured is a model's peak GPU memory over one batch-1 forward pass.
type Measured struct {
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	PeakContext     int   `json:"peak_context"`
	// Dtype is what the model was loaded in ("saved": its own).
	Dtype  string `json:"dtype,omitempty"`
	Device string `json:"device"`
}

// Write stores results as results_<date>.json under dir, as lm-eval does.
func Write(dir string, r *Results, now time.Time) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("lm-eval results: %w", err)
	}
	p := filepath.Join(dir, "results_"+now.UTC().Format("2006-01-02T15-04-05.000000")+".json")
	return p, WriteFile(p, r, now)
}

// WriteFile stores results as the file path (the name the worker chose).
func WriteFile(path string, r *Results, now time.Time) error {
	r.Date = float64(now.Unix())
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("lm-eval results: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("lm-eval results: %w", err)
	}
	return nil
}

// MaxBytes caps what is read of a results file: lm-eval's are kilobytes
// (MMLU with its 57 subtasks, about 100 KB); an evaluator that writes
// more is broken or hostile.
const MaxBytes = 32 << 20

// Parse parses a results file's content, read from name.
func Parse(b []byte, name string) (*Results, error) {
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("lm-eval results %s: not valid JSON: %w", name, err)
	}
	if len(r.Results) == 0 {
		return nil, fmt.Errorf("lm-eval results %s: no \"results\" section", name)
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
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return 0, fmt.Errorf("results.%s.%q is %v, not a score", task, field, f)
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
			// Metrics are "metric,filter" keys; lm-eval 0.4.12 adds
			// plain ones beside them (sample_len, name) that are not.
			if x, ok := v.(float64); ok && strings.Contains(f, ",") && !strings.Contains(f, "stderr") && !math.IsNaN(x) && !math.IsInf(x, 0) {
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
