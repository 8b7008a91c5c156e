// WriteSVG draws mean scores per task and agent as grouped bars with their 95 % intervals as error bars (none under two scores).

package leaderboard

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
)

// WriteSVG draws mean scores per task and agent as grouped bars with
// their 95 % intervals as error bars (none under two scores); a browser
// opens it as is. The notes stay out of it: the chart is as wide as its
// bars.
func WriteSVG(w io.Writer, rows []Row) error {
	var tasks, agents []string
	seenT, seenA := map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		if !seenT[r.Task] {
			seenT[r.Task] = true
			tasks = append(tasks, r.Task)
		}
		if !seenA[r.Agent] {
			seenA[r.Agent] = true
			agents = append(agents, r.Agent)
		}
	}
	sort.Strings(agents)
	colors := []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948"}
	const left, top, plotH, barW, gap = 60, 40, 300, 22, 18
	groupW := barW*len(agents) + gap
	width := left + groupW*len(tasks) + 160
	height := top + plotH + 140
	y := func(v float64) float64 { return top + plotH - math.Max(0, math.Min(1, v))*plotH }
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	p(`<text x="%d" y="20" font-size="14">Score per task (mean of scored runs, 95%% CI); failures and invalid runs not in the bars</text>`+"\n", left)
	for i := 0; i <= 4; i++ {
		v := float64(i) / 4
		p(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%.2f</text>`+"\n", left, left+groupW*len(tasks), y(v), y(v), left-6, y(v)+4, v)
	}
	index := map[[2]string]Row{}
	for _, r := range rows {
		index[[2]string{r.Task, r.Agent}] = r
	}
	for ti, t := range tasks {
		x0 := left + ti*groupW + gap/2
		for ai, a := range agents {
			r, ok := index[[2]string{t, a}]
			if !ok || r.Scored == 0 {
				continue
			}
			x := float64(x0 + ai*barW)
			p(`<rect x="%.1f" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s / %s: %.4f (n=%d, %d invalid)</title></rect>`+"\n",
				x, y(r.Mean), barW-2, y(0)-y(r.Mean), colors[ai%len(colors)], html.EscapeString(t), html.EscapeString(a), r.Mean, r.Scored, r.Invalid)
			if r.Scored < 2 {
				continue
			}
			cx := x + float64(barW-2)/2
			p(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#222"/>`+"\n", cx, cx, y(r.CILow), y(r.CIHigh))
			for _, v := range []float64{r.CILow, r.CIHigh} {
				p(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#222"/>`+"\n", cx-4, cx+4, y(v), y(v))
			}
		}
		p(`<text transform="translate(%d,%d) rotate(35)">%s</text>`+"\n", x0, top+plotH+14, html.EscapeString(t))
	}
	for ai, a := range agents {
		lx, ly := left+groupW*len(tasks)+20, top+ai*20
		p(`<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly, colors[ai%len(colors)], lx+18, ly+11, html.EscapeString(a))
	}
	p("</svg>\n")
	return nil
}
