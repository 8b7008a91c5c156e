// The report's curve charts.

package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/run/runs"
)

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1"}

// series is one line of a curve chart: points of (agent seconds, score).
type series struct {
	name  string
	color string
	pts   [][2]float64
	thin  bool
	// final, if set, is the final model's score (the test split), drawn
	// at the end of the budget.
	final *float64
}

// chart is what a curve chart shows beside its lines: the budget its x
// axis runs to, and the split its marks were scored on.
type chart struct {
	title   string
	budgetS float64
	split   string
}

// curveSVG draws score (best so far) over agent time: a thick line per
// agent (the mean over its runs at each mark) over thin lines per run.
func curveSVG(w io.Writer, c chart, lines []series) {
	const left, top, pw, ph = 56, 34, 560, 260
	maxX, minY, maxY := math.Max(1, c.budgetS), math.Inf(1), math.Inf(-1)
	thin := 0
	for _, s := range lines {
		for _, p := range s.pts {
			maxX, minY, maxY = math.Max(maxX, p[0]), math.Min(minY, p[1]), math.Max(maxY, p[1])
		}
		if s.final != nil {
			minY, maxY = math.Min(minY, *s.final), math.Max(maxY, *s.final)
		}
		if s.thin {
			thin++
		}
	}
	if math.IsInf(minY, 1) {
		minY, maxY = 0, 1
	}
	minY, maxY = math.Max(0, math.Floor(minY*10)/10), math.Min(1, math.Ceil(maxY*10)/10)
	if maxY <= minY {
		minY, maxY = math.Max(0, minY-0.1), minY+0.1
	}
	x := func(v float64) float64 { return left + v/maxX*pw }
	y := func(v float64) float64 { return top + ph - (v-minY)/(maxY-minY)*ph }
	p := func(f string, a ...any) { _, _ = fmt.Fprintf(w, f, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" class="curve" width="%d" height="%d" font-family="sans-serif" font-size="11">`, left+pw+150, top+ph+56)
	title := c.title
	if c.split != "" {
		title += fmt.Sprintf(" — marks scored on the %s split", c.split)
	}
	p(`<text x="%d" y="18" font-size="13">%s</text>`, left, html.EscapeString(title))
	for i := 0; i <= 4; i++ {
		v := minY + (maxY-minY)*float64(i)/4
		p(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%.2f</text>`, left, left+pw, y(v), y(v), left-4, y(v)+4, v)
		t := maxX * float64(i) / 4
		p(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x(t), top+ph+16, human(t))
	}
	p(`<text x="%d" y="%d" text-anchor="middle">agent time</text>`, left+pw/2, top+ph+34)
	legend := 0
	for _, s := range lines {
		if len(s.pts) == 0 {
			continue
		}
		width, op := 2.5, 1.0
		if s.thin {
			// Many runs' lines would blend into one colour.
			width, op = 1, math.Min(0.35, 4/float64(max(thin, 1)))
		}
		p(`<polyline fill="none" stroke="%s" stroke-width="%.1f" opacity="%.2f" points="`, s.color, width, op)
		for _, pt := range s.pts {
			p("%.1f,%.1f ", x(pt[0]), y(pt[1]))
		}
		p(`"/>`)
		if !s.thin {
			for _, pt := range s.pts {
				p(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %.4f at %s</title></circle>`, x(pt[0]), y(pt[1]), s.color, html.EscapeString(s.name), pt[1], human(pt[0]))
			}
			p(`<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`, left+pw+12, top+legend*16, s.color, left+pw+26, top+legend*16+9, html.EscapeString(s.name))
			legend++
		}
		if f := s.final; f != nil && !s.thin {
			fx, fy := x(maxX), y(*f)
			p(`<path class="final" d="M%.1f %.1fl5 5l-5 5l-5 -5z" fill="%s" stroke="#222"><title>%s: final model %.4f (test split)</title></path>`, fx, fy-5, s.color, html.EscapeString(s.name), *f)
		}
	}
	p(`<text x="%d" y="%d" fill="#444">◆ the final model's score (test split), at the end of the budget</text>`, left, top+ph+52)
	p("</svg>\n")
}

// curvePoints are a run's best-so-far points at its marks' agent times
// (marks with no model yet are left out: no score, not 0).
func curvePoints(marks []runs.Mark) [][2]float64 {
	var pts [][2]float64
	for _, m := range marks {
		if m.Best != nil {
			pts = append(pts, [2]float64{m.AtS, *m.Best})
		}
	}
	return pts
}

// meanCurve is the mean best-so-far over runs at each mark that every
// run with a score there shares.
func meanCurve(curves [][]runs.Mark) [][2]float64 {
	sum, n := map[float64]float64{}, map[float64]int{}
	for _, c := range curves {
		for _, m := range c {
			if m.Best != nil {
				sum[m.AtS] += *m.Best
				n[m.AtS]++
			}
		}
	}
	var pts [][2]float64
	for at, s := range sum {
		pts = append(pts, [2]float64{at, s / float64(n[at])})
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i][0] < pts[j][0] })
	return pts
}

// timelineSVG draws a run's attempts and evaluations on wall time: lease
// wait, agent time (lost time apart) and each evaluation.
func timelineSVG(w io.Writer, r *runs.Result) {
	type bar struct {
		label, color, tip string
		from, to          time.Time
	}
	var bars []bar
	for _, a := range r.AttemptLog {
		wait := time.Duration(a.LeaseWaitS * float64(time.Second))
		bars = append(bars, bar{fmt.Sprintf("attempt %d: lease wait", a.N), "#bab0ac", fmt.Sprintf("waited %s for a slot on %s", wait.Round(time.Millisecond), a.Host), a.LeasedAt.Add(-wait), a.LeasedAt})
		color := "#59a14f"
		if a.End == "lost" || a.End == "handed_back" || a.End == "failed" {
			color = "#e15759"
		}
		bars = append(bars, bar{fmt.Sprintf("attempt %d: %s", a.N, a.End), color,
			fmt.Sprintf("agent time %s → %s, lost %s: %s", human(a.FromS), human(a.ToS), human(a.LostS), a.Detail), a.LeasedAt, a.EndedAt})
	}
	for i, e := range r.Evaluations {
		color, what := "#4e79a7", "scored"
		if e.Score == nil {
			color, what = "#e15759", "failed: "+e.Error
		}
		from := e.Started
		if from.IsZero() {
			from = e.At
		}
		bars = append(bars, bar{fmt.Sprintf("evaluation %d", i+1), color, what, from, e.At})
	}
	if len(bars) == 0 {
		_, _ = io.WriteString(w, "<p>No timeline: the run kept none (it ran before timelines were kept).</p>\n")
		return
	}
	t0, t1 := bars[0].from, bars[0].to
	for _, b := range bars {
		if b.from.Before(t0) {
			t0 = b.from
		}
		if b.to.After(t1) {
			t1 = b.to
		}
	}
	span := math.Max(t1.Sub(t0).Seconds(), 1)
	const left, pw, rowH = 190, 520, 20
	p := func(f string, a ...any) { _, _ = fmt.Fprintf(w, f, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="%d" height="%d" font-family="sans-serif" font-size="11">`, left+pw+20, len(bars)*rowH+30)
	for i, b := range bars {
		x0 := left + b.from.Sub(t0).Seconds()/span*pw
		wd := math.Max(2, b.to.Sub(b.from).Seconds()/span*pw)
		p(`<text x="%d" y="%d" text-anchor="end">%s</text><rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`,
			left-6, i*rowH+14, html.EscapeString(b.label), x0, i*rowH+3, wd, rowH-6, b.color, html.EscapeString(b.tip))
	}
	p(`<text x="%d" y="%d">%s</text><text x="%d" y="%d" text-anchor="end">+%s wall time</text></svg>`+"\n", left, len(bars)*rowH+20, t0.UTC().Format(time.RFC3339), left+pw, len(bars)*rowH+20, human(span))
}

// human is seconds as a short duration: 16h, 1h30m, 2m5s, 22.5s.
func human(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= time.Hour:
		d = d.Round(time.Minute)
		h, m := d/time.Hour, (d%time.Hour)/time.Minute
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	case d >= time.Minute:
		d = d.Round(time.Second)
		m, sec := d/time.Minute, (d%time.Minute)/time.Second
		if sec == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%ds", m, sec)
	}
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", d.Seconds()), "0"), ".") + "s"
}
