// The report's index page: the board as tasks × agents.

package report

import (
	"bytes"
	"html/template"
	"maps"
	"math"
	"slices"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// pivot is the board as tasks × agents: each cell a row's mean with
// failures and success rate, linking to its runs.
type pivot struct {
	Agents []string
	Tasks  []pivotRow
}

type pivotRow struct {
	Task  string
	Cells []*leaderboard.Row
}

func pivotOf(b leaderboard.Board) pivot {
	var p pivot
	for _, a := range b.Agents {
		p.Agents = append(p.Agents, a.Agent)
	}
	col := map[string]int{}
	for i, a := range p.Agents {
		col[a] = i
	}
	for i := range b.Rows {
		r := &b.Rows[i]
		if len(p.Tasks) == 0 || p.Tasks[len(p.Tasks)-1].Task != r.Task {
			p.Tasks = append(p.Tasks, pivotRow{Task: r.Task, Cells: make([]*leaderboard.Row, len(p.Agents))})
		}
		p.Tasks[len(p.Tasks)-1].Cells[col[r.Agent]] = r
	}
	return p
}

type taskCurve struct {
	Task string
	SVG  template.HTML
}

// curvesByTask draws each task's curves: per agent, the mean best so far
// over its runs, with each run's own line under it.
func curvesByTask(rs []runs.Result, agents []string) []taskCurve {
	byTask := map[string]map[string][]*runs.Result{}
	for i := range rs {
		r := &rs[i]
		if len(r.Curve) == 0 {
			continue
		}
		if byTask[r.Task] == nil {
			byTask[r.Task] = map[string][]*runs.Result{}
		}
		byTask[r.Task][r.Agent] = append(byTask[r.Task][r.Agent], r)
	}
	// An agent has one colour on every chart: its place on the board.
	color := map[string]string{}
	for i, a := range agents {
		color[a] = palette[i%len(palette)]
	}
	var out []taskCurve
	for _, task := range slices.Sorted(maps.Keys(byTask)) {
		var lines []series
		c := chart{title: task + ": best score so far over agent time (mean over runs; thin: each run)"}
		for _, agent := range slices.Sorted(maps.Keys(byTask[task])) {
			var curves [][]runs.Mark
			var finals []float64
			for _, r := range byTask[task][agent] {
				lines = append(lines, series{name: agent, color: color[agent], pts: curvePoints(r.Curve), thin: true})
				curves = append(curves, r.Curve)
				c.budgetS, c.split = math.Max(c.budgetS, r.TimeLimitS), r.Curve[0].Split
				if r.Score != nil {
					finals = append(finals, *r.Score)
				}
			}
			s := series{name: agent, color: color[agent], pts: meanCurve(curves)}
			if m, _ := leaderboard.MeanStd(finals); len(finals) > 0 {
				s.final = &m
			}
			lines = append(lines, s)
		}
		var b bytes.Buffer
		curveSVG(&b, c, lines)
		out = append(out, taskCurve{Task: task, SVG: template.HTML(b.String())}) // #nosec: our own SVG, every text escaped
	}
	return out
}
