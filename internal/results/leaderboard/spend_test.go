package leaderboard

import (
	"bytes"
	"strings"
	"testing"
)

// TestEqualSpend: a task's agents are compared at a quarter, half and
// all of the least median spend: a cheap agent that scores fast beats a
// costly one at small spends and loses at the full one; a run with no
// scored mark by a spend is counted apart, not as 0; a task with one
// agent, or marks without costs, is left out.
func TestEqualSpend(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	curve := func(pts ...float64) []Mark {
		var ms []Mark
		for i := 0; i < len(pts); i += 2 {
			ms = append(ms, Mark{AtS: float64(i), CostUSD: f(pts[i]), Score: f(pts[i+1])})
		}
		return ms
	}
	runs := []Entry{
		// cheap: $10 → 0.5, $20 → 0.6, $40 → 0.62 (median last spend 40)
		{Task: "t", Agent: "cheap", Curve: curve(10, 0.5, 20, 0.6, 40, 0.62)},
		{Task: "t", Agent: "cheap", Curve: curve(10, 0.4, 20, 0.5, 40, 0.6)},
		// costly: $30 → 0.3, $60 → 0.9, $120 → 0.95 (median last spend 120)
		{Task: "t", Agent: "costly", Curve: curve(30, 0.3, 60, 0.9, 120, 0.95)},
		{Task: "t", Agent: "costly", Curve: curve(30, 0.35, 60, 0.85, 120, 0.9)},
		{Task: "solo", Agent: "cheap", Curve: curve(1, 0.1)},
		{Task: "t", Agent: "unpriced", Curve: []Mark{{AtS: 1, Score: f(1)}}},
	}
	levels := EqualSpend(runs)
	if len(levels) != 3 || levels[0].Task != "t" || levels[0].USD != 10 || levels[1].USD != 20 || levels[2].USD != 40 {
		t.Fatalf("levels %+v", levels)
	}
	at := func(l SpendLevel, agent string) AgentAtSpend {
		for _, a := range l.Agents {
			if a.Agent == agent {
				return a
			}
		}
		t.Fatalf("no %s at $%v", agent, l.USD)
		return AgentAtSpend{}
	}
	if c := at(levels[0], "cheap"); c.Mean == nil || *c.Mean != 0.45 || c.Reached != 2 {
		t.Fatalf("cheap at $10: %+v", c)
	}
	if c := at(levels[0], "costly"); c.Mean != nil || c.Reached != 0 || c.Runs != 2 {
		t.Fatalf("costly at $10 had no scored mark: %+v", c)
	}
	if c := at(levels[2], "costly"); *c.Mean < 0.3249 || *c.Mean > 0.3251 {
		t.Fatalf("costly at $40: %v", *c.Mean)
	}
	var b bytes.Buffer
	WriteEqualSpend(&b, levels)
	if !strings.Contains(b.String(), "| t | $40.00 | cheap: 0.6100 (2 of 2); costly: 0.3250 (2 of 2) |") {
		t.Fatalf("markdown:\n%s", b.String())
	}
}
