// Curve is how a run's research is scored over time.

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
	// DevArgs, if set, are appended to evaluation.command so that the
	// final evaluation's run also scores the dev split, into
	// {dev_results}, when the final checkpoint is also a mark (a run's
	// last, nearly always): the model is loaded once, not twice (minutes
	// of a GPU for a real model; a process start for a mini one). The
	// test split is scored by evaluation.command all the same, so a task
	// that replaces that command keeps its evaluator. If the run fails,
	// the two are run apart, as without it, so that a failure is judged
	// as before; a task with evaluation.check runs them apart always (the
	// two splits' outputs would mix).
	DevArgs []string `yaml:"dev_args,omitempty" json:"dev_args,omitempty"`
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

// checkDevArgs refuses dev_args whose run could not stand for the two
// it replaces: eval is evaluation.command.
func (c *Curve) checkDevArgs(eval []string) error {
	names := func(args []string, p string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, p) })
	}
	switch {
	case len(c.Command) == 0:
		return fmt.Errorf("evaluation.curve.dev_args needs evaluation.curve.command: a mark that is not the final checkpoint is scored on the dev split alone")
	case !names(c.DevArgs, "{dev_results}"):
		return fmt.Errorf("evaluation.curve.dev_args must name the dev split's results file as {dev_results}")
	case !names(eval, "{results}"):
		return fmt.Errorf("evaluation.curve.dev_args needs evaluation.command to name its results file as {results}: the run leaves two, which could not be told apart")
	}
	return nil
}
