package tasks

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Curve is how a run's research is scored over time: after its final
// evaluation, the committed checkpoints nearest these marks of agent
// time are evaluated too, the agent never involved.
type Curve struct {
	// At are the marks: durations of agent time ("1h") or fractions of
	// the run's budget ("0.25"), the form a suite of any length shares.
	At []MarkTime `yaml:"at" json:"at"`
	// Command, if set, scores the marks instead of evaluation.command (a
	// dev split, with the same placeholders), so that the test split
	// scores the final model alone.
	Command []string `yaml:"command,omitempty" json:"command,omitempty"`
}

// MarkTime is a point of agent time: a duration, or a fraction of the budget.
type MarkTime struct {
	D        time.Duration
	Fraction float64
}

// ParseMark reads "90m", "1h" or a fraction of the budget in (0, 1].
func ParseMark(s string) (MarkTime, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f <= 0 || f > 1 {
			return MarkTime{}, fmt.Errorf("%q: a fraction of the budget must be in (0, 1]", s)
		}
		return MarkTime{Fraction: f}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return MarkTime{}, fmt.Errorf("%q is neither a positive duration (1h) nor a fraction of the budget (0.25)", s)
	}
	return MarkTime{D: d}, nil
}

// Seconds is the mark in agent seconds of a run whose budget is limit.
func (m MarkTime) Seconds(limit time.Duration) float64 {
	if m.Fraction > 0 {
		return m.Fraction * limit.Seconds()
	}
	return m.D.Seconds()
}

func (m MarkTime) String() string {
	if m.Fraction > 0 {
		return strconv.FormatFloat(m.Fraction, 'g', -1, 64)
	}
	return m.D.String()
}

// UnmarshalYAML reads a mark written as a duration or a number.
func (m *MarkTime) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseMark(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: evaluation.curve.at: %w", n.Line, err)
	}
	*m = v
	return nil
}

// MarshalYAML writes the short form.
func (m MarkTime) MarshalYAML() (any, error) { return m.String(), nil }

// MarshalJSON writes the short form.
func (m MarkTime) MarshalJSON() ([]byte, error) { return json.Marshal(m.String()) }

// UnmarshalJSON reads the short form.
func (m *MarkTime) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseMark(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// MarkSeconds are marks in agent seconds of a run whose budget is limit:
// ascending, each once, none past the budget.
func MarkSeconds(marks []MarkTime, limit time.Duration) []float64 {
	var out []float64
	for _, m := range marks {
		s := m.Seconds(limit)
		if s > limit.Seconds() {
			continue
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
