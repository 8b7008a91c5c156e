// Anchors are a task's two reference scores.

package tasks

import (
	"fmt"
	"math"
	"time"
)

// Anchors are a task's two reference scores: the leaderboard reports
// beside each raw mean the share of the gap between them that a run
// closed (MLRC-Bench's relative improvement), 100 × (score − baseline) /
// (top − baseline).
type Anchors struct {
	Baseline *Anchor `yaml:"baseline" json:"baseline"`
	Top      *Anchor `yaml:"top" json:"top"`
}

// Anchor is one reference score and where it comes from: measured here
// (the run, its agent and budget, the evaluator that scored it; over
// several seeds, the mean of their runs) or, when not, a citation.
type Anchor struct {
	Score float64 `yaml:"score" json:"score"`
	RunID string  `yaml:"run_id,omitempty" json:"run_id,omitempty"`
	// Runs are every run the score is the mean of, when more than one.
	Runs      []string  `yaml:"runs,omitempty" json:"runs,omitempty"`
	Agent     string    `yaml:"agent,omitempty" json:"agent,omitempty"`
	TimeLimit Duration  `yaml:"time_limit,omitempty" json:"time_limit,omitempty"`
	Evaluator string    `yaml:"evaluator,omitempty" json:"evaluator,omitempty"`
	Measured  time.Time `yaml:"measured,omitempty" json:"measured,omitempty"`
	Citation  string    `yaml:"citation,omitempty" json:"citation,omitempty"`
}

// Check tells an anchor with its provenance from one without.
func (a *Anchor) Check(field string) error {
	switch {
	case a == nil:
		return fmt.Errorf("missing required field %q", field)
	case math.IsNaN(a.Score) || math.IsInf(a.Score, 0):
		return fmt.Errorf("%s.score must be a number", field)
	case a.Citation == "" && (a.RunID == "" || a.Evaluator == ""):
		return fmt.Errorf("%s needs its source: run_id and evaluator when measured here (`starter anchors measure`), else a citation", field)
	}
	return nil
}

func (a *Anchors) check() error {
	if a == nil {
		return nil
	}
	if err := a.Baseline.Check("anchors.baseline"); err != nil {
		return err
	}
	return a.Top.Check("anchors.top")
}
