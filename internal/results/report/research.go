// research fills a run page's research timeline and experiments from the run's observations in the store (none.

package report

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"html/template"
	"io"
	"math"

	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
)

// research fills a run page's research timeline and experiments from
// the run's observations in the store (none: the page says so).
func research(ctx context.Context, in Input, r *runs.Result, p *runPage) error {
	var obs []*observe.Observation
	if in.Store != nil {
		var err error
		if obs, err = observe.Load(ctx, in.Store, r.RunID); err != nil {
			return err
		}
	}
	rs := runresults.Research(r, obs, in.MinExperiment)
	var b bytes.Buffer
	researchSVG(&b, r, rs, obs)
	p.Research, p.Experiments = template.HTML(b.String()), rs.Experiments // #nosec: built with every value escaped
	return nil
}

// outcomeColor is each experiment outcome's bar.
var outcomeColor = map[observe.Outcome]string{
	observe.Ended: "#59a14f", observe.OOMKilled: "#e15759", observe.CutOff: "#f28e2b", observe.Lost: "#79706e", observe.Canceled: "#b07aa1",
}

// researchLanes bounds the experiment rows: experiments that overlap in
// time share no row, and past this many rows the rest share the last.
const researchLanes = 10

// researchSVG draws a run's research on its agent-time axis (0 to the
// budget): experiments as bars by outcome, packed into rows; the leased
// GPUs' mean utilisation; LLM calls and checkpoints as ticks (a model
// added marked); the curve's marks with their scores. Everything is
// binned to the plot's pixels, so a 24 h run with samples every 30 s
// and thousands of calls draws in a few hundred elements per row.
func researchSVG(w io.Writer, r *runs.Result, rs observe.Research, obs []*observe.Observation) {
	span := math.Max(r.Budget.GrantedS(), r.Budget.UsedS)
	if span <= 0 || len(obs) == 0 {
		_, _ = io.WriteString(w, "<p>No research timeline: the run was not observed.</p>\n")
		return
	}
	const left, pw, rowH = 110, 640, 16
	x := func(s float64) float64 { return left + math.Max(0, math.Min(s, span))/span*pw }
	lanes := packLanes(rs.Experiments)
	nLanes := 1
	for _, l := range lanes {
		nLanes = max(nLanes, l+1)
	}
	top := 0
	rowY := func(row int) int { return top + row*rowH }
	const gpuH = 40
	height := nLanes*rowH + gpuH + 3*rowH + 30
	p := func(f string, a ...any) { _, _ = fmt.Fprintf(w, f, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" class="research" width="%d" height="%d" font-family="sans-serif" font-size="11">`, left+pw+20, height)
	p(`<text x="%d" y="%d" text-anchor="end">experiments</text>`, left-6, rowY(0)+12)
	for i, e := range rs.Experiments {
		y := rowY(lanes[i])
		tip := fmt.Sprintf("%s — %s, %s to %s of agent time, %.3f GPU h", e.Command, e.Outcome, human(e.StartS), human(e.EndS), e.GPUHours)
		if m := e.Model; m != nil {
			tip += fmt.Sprintf("; model %s in checkpoint #%d", m.Path, m.Checkpoint)
			if m.Score != nil {
				tip += fmt.Sprintf(" scored %.4f (%s)", *m.Score, m.Split)
			}
		}
		p(`<rect class="exp %s" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`, e.Outcome, x(e.StartS), y+2,
			math.Max(1, x(e.EndS)-x(e.StartS)), rowH-4, outcomeColor[e.Outcome], html.EscapeString(tip))
	}
	top = nLanes*rowH + 4
	gpuTop := top
	p(`<text x="%d" y="%d" text-anchor="end">GPU util</text><rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ddd"/>`, left-6, gpuTop+gpuH/2+4, left, gpuTop, pw, gpuH)
	if pts := gpuLine(obs, span, left, pw, gpuTop, gpuH); pts != "" {
		p(`<polyline class="gpu" fill="none" stroke="#4e79a7" stroke-width="1" points="%s"/>`, pts)
	}
	top = gpuTop + gpuH + 4
	p(`<text x="%d" y="%d" text-anchor="end">LLM calls</text>`, left-6, rowY(0)+12)
	for _, b := range callBins(obs, span, pw) {
		p(`<rect class="call" x="%d" y="%d" width="1" height="%d" fill="#9c755f" opacity="%.2f"><title>%d calls</title></rect>`, left+b[0], rowY(0)+2, rowH-4, math.Min(1, 0.3+0.1*float64(b[1])), b[1])
	}
	p(`<text x="%d" y="%d" text-anchor="end">checkpoints</text>`, left-6, rowY(1)+12)
	for _, o := range obs {
		for _, c := range o.Checkpoints {
			color, tip := "#bab0ac", fmt.Sprintf("checkpoint #%d at %s", c.Seq, human(c.AgentS))
			if len(c.Models) > 0 {
				color, tip = "#4e79a7", tip+": model "+c.Models[0]
			}
			p(`<rect class="ck" x="%.1f" y="%d" width="2" height="%d" fill="%s"><title>%s</title></rect>`, x(c.AgentS), rowY(1)+2, rowH-4, color, html.EscapeString(tip))
		}
	}
	p(`<text x="%d" y="%d" text-anchor="end">marks</text>`, left-6, rowY(2)+12)
	for _, m := range r.Curve {
		tip := fmt.Sprintf("mark %s: no score", human(m.AtS))
		if m.Score != nil {
			tip = fmt.Sprintf("mark %s: %.4f (%s)", human(m.AtS), *m.Score, m.Split)
		}
		if m.CostUSD != nil {
			tip += fmt.Sprintf(", $%.2f spent by then", *m.CostUSD)
		}
		p(`<path class="mark" d="M%.1f %d l4 6 l-4 6 l-4 -6 z" fill="#edc948"><title>%s</title></path>`, x(m.AtS), rowY(2)+2, html.EscapeString(tip))
	}
	axis := rowY(3) + 12
	p(`<text x="%d" y="%d">0</text><text x="%d" y="%d" text-anchor="end">%s of agent time</text></svg>`+"\n", left, axis, left+pw, axis, human(span))
}

// packLanes gives each experiment (sorted by start) the first row free
// at its start, the last row when none is.
func packLanes(es []observe.Experiment) []int {
	ends := make([]float64, researchLanes)
	for i := range ends {
		ends[i] = math.Inf(-1)
	}
	out := make([]int, len(es))
	for i, e := range es {
		lane := researchLanes - 1
		for l, end := range ends {
			if end <= e.StartS {
				lane = l
				break
			}
		}
		ends[lane] = math.Max(ends[lane], e.EndS)
		out[i] = lane
	}
	return out
}

// gpuLine is the leased GPUs' mean utilisation, one point per pixel
// column that has samples, in the band of height h at y (100 % at top).
func gpuLine(obs []*observe.Observation, span float64, left, pw, y, h int) string {
	sum, n := make([]float64, pw+1), make([]int, pw+1)
	for _, o := range obs {
		for _, g := range o.GPU {
			px := int(math.Max(0, math.Min(o.AgentAt(g.At), span)) / span * float64(pw))
			sum[px] += g.Util
			n[px]++
		}
	}
	var b []byte
	for px := range sum {
		if n[px] > 0 {
			b = fmt.Appendf(b, "%d,%.1f ", left+px, float64(y+h)-sum[px]/float64(n[px])/100*float64(h))
		}
	}
	return string(b)
}

// callBins counts calls per pixel column: [column, calls], in order.
func callBins(obs []*observe.Observation, span float64, pw int) [][2]int {
	n := make([]int, pw+1)
	for _, o := range obs {
		for _, c := range o.Calls {
			n[int(math.Max(0, math.Min(o.AgentAt(c.Start), span))/span*float64(pw))]++
		}
	}
	var out [][2]int
	for px, c := range n {
		if c > 0 {
			out = append(out, [2]int{px, c})
		}
	}
	return out
}
