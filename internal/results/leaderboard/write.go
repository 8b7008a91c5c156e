// Renderings of the leaderboard: table, JSON, CSV, Markdown.

package leaderboard

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Formats are the renderings Write knows.
var Formats = []string{"table", "md", "csv", "json", "svg"}

// Write renders a benchmark's board (Build) in one of Formats. The
// aggregate activity stores it and `starter results` prints it, so both
// always show the same thing.
func Write(w io.Writer, format, benchmarkID string, b Board) error {
	runs, setup := b.Runs, b.Setup
	notes := b.Notes(setup)
	switch format {
	case "table":
		// The notes first, the table, then what a reader acts on: each
		// agent at a glance and the paired comparisons.
		for _, l := range notes {
			fmt.Fprintln(w, l)
		}
		fmt.Fprintln(w)
		WriteTable(w, b.Rows)
		fmt.Fprintln(w)
		WriteAgents(w, b.Agents)
		for _, p := range b.Pairs {
			fmt.Fprintln(w, "paired "+PairLine(p))
		}
		return nil
	case "md":
		WriteMarkdown(w, b.Rows)
		fmt.Fprintln(w)
		if len(b.EqualSpend) > 0 {
			fmt.Fprintln(w, "Equal spend: each agent's best score reached by a given cost.")
			fmt.Fprintln(w)
			WriteEqualSpend(w, b.EqualSpend)
			fmt.Fprintln(w)
		}
		for _, p := range b.Pairs {
			fmt.Fprintf(w, "- paired %s\n", PairLine(p))
		}
		for _, l := range notes {
			fmt.Fprintf(w, "- %s\n", l)
		}
		return nil
	case "csv":
		return WriteCSV(w, b.Rows)
	case "svg":
		return WriteSVG(w, b.Rows)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"benchmark_id": benchmarkID, "rows": jsonRows(b.Rows), "agents": jsonAgents(b.Agents), "paired": jsonPairs(b.Pairs),
			"runs": runs, "setup": setup, "cost": b.Cost, "warnings": b.Warnings, "tasks": "fixed", "statement": Statement, "equal_spend": b.EqualSpend})
	}
	return fmt.Errorf("format %q is not one of %s", format, strings.Join(Formats, ", "))
}

// Notes are the lines under a board: warnings first, then its cost,
// setup, anchors and the question its statistics answer.
func (b Board) Notes(setup Setup) []string {
	notes := append(append([]string{}, b.Warnings...), b.Cost.Line())
	notes = append(append(notes, setup.lines()...), gapLines(b.Rows, setup.Anchors, setup.Terse)...)
	return append(notes, Statement)
}

// finite is x, or nil for NaN and ±Inf (JSON has neither, and 0 would
// read as a value).
func finite(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return x
}

// interval is [lo, hi], or nil when either end is unknown.
func interval(lo, hi float64) any {
	if finite(lo) == nil || finite(hi) == nil {
		return nil
	}
	return []float64{lo, hi}
}

// jsonRows leaves out the statistics a row does not have.
func jsonRows(rows []Row) []map[string]any {
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		m := map[string]any{"task": r.Task, "agent": r.Agent, "runs": r.Runs, "scored": r.Scored, "agent_failed": r.AgentFailed, "invalid": r.Invalid,
			"disqualified": r.Disqualified, "hacked": r.Hacked, "retried": r.Retried, "flagged": r.Flagged, "cost": r.Cost, "floor": r.Floor, "floor_from": r.FloorFrom, "counted": r.Counted,
			"success_rate": finite(r.SuccessRate), "success_ci95": interval(r.SuccessLow, r.SuccessHigh),
			"mean": finite(r.Mean), "std": finite(r.Std), "sem": finite(r.SEM), "min": finite(r.Min), "max": finite(r.Max),
			"ci95": interval(r.CILow, r.CIHigh), "ci_method": r.CIMethod,
			"mean_with_failures": finite(r.FloorMean), "mean_with_failures_ci95": interval(r.FloorLow, r.FloorHigh), "mdd": finite(r.MDD),
			"research": r.Research}
		if r.Baseline != nil {
			m["baseline"], m["top"], m["near_zero_gap"] = *r.Baseline, *r.Top, r.NearZeroGap
			m["gap_closed_pct"], m["gap_closed_ci95"] = finite(r.GapClosed), interval(r.GapLow, r.GapHigh)
		}
		if r.Human != "" {
			m["human"] = r.Human
		}
		out = append(out, m)
	}
	return out
}

func jsonAgents(as []AgentSummary) []map[string]any {
	out := make([]map[string]any, 0, len(as))
	for _, a := range as {
		out = append(out, map[string]any{"agent": a.Agent, "runs": a.Runs, "scored": a.Scored, "agent_failed": a.AgentFailed, "invalid": a.Invalid,
			"success_rate": finite(a.SuccessRate), "success_ci95": interval(a.SuccessLow, a.SuccessHigh),
			"gap_closed_pct": finite(a.Gap), "gap_closed_ci95": interval(a.GapLow, a.GapHigh), "gap_tasks": a.GapTasks, "cost": a.Cost, "certified": a.Certified})
	}
	return out
}

// WriteMarkdown prints rows as a Markdown table.
func WriteMarkdown(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| task | agent | runs | scored / agent failed / apart | success [Wilson 95 %] | mean of scored (n) | 95 % CI | mean, failures at floor [95 % CI] | gap closed % [95 % CI] | std | min | max | retried | GPU h used / billed | $ GPU / LLM | experiments/h / GPU busy / first model | MDD (80 %) |")
	fmt.Fprintln(w, "|---|---|---:|---:|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %d | %d / %d / %d | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s / %s | %.2f / %.2f | %s | %s |\n", r.Task, AgentCell(r), r.Runs, r.Scored, r.AgentFailed, r.Invalid,
			SuccessCell(r.SuccessRate, r.SuccessLow, r.SuccessHigh), meanCell(r), CICell(r), floorCell(r), GapCell(r), num(r.Std), num(r.Min), num(r.Max), r.Retried,
			num(r.Cost.GPUHours), num(r.Cost.BilledGPUHours), r.Cost.GPUUSD, r.Cost.LLMUSD, researchCell(r.Research), num(r.MDD))
	}
}

// WriteCSV prints rows as CSV.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(append([]string{"task", "agent", "runs", "scored", "agent_failed", "invalid", "disqualified", "success_rate", "success_low", "success_high",
		"mean", "std", "sem", "ci95_low", "ci95_high", "ci_method", "min", "max", "floor", "mean_with_failures", "mean_with_failures_low", "mean_with_failures_high",
		"gap_closed_pct", "gap_closed_low", "gap_closed_high", "baseline", "top", "retried",
		"agent_hours", "gpu_hours", "billed_gpu_hours", "wasted_gpu_hours", "infra_wait_hours", "llm_calls", "llm_tokens", "llm_usd", "reported_llm_usd", "gpu_usd", "gpu_unpriced_runs", "mdd"}, append(slices.Clone(researchColumns), "hacked")...))
	for _, r := range rows {
		c := r.Cost
		_ = cw.Write(append([]string{r.Task, r.Agent, strconv.Itoa(r.Runs), strconv.Itoa(r.Scored), strconv.Itoa(r.AgentFailed), strconv.Itoa(r.Invalid), strconv.Itoa(r.Disqualified),
			num(r.SuccessRate), num(r.SuccessLow), num(r.SuccessHigh),
			num(r.Mean), num(r.Std), num(r.SEM), num(r.CILow), num(r.CIHigh), r.CIMethod, num(r.Min), num(r.Max), num(r.Floor), num(r.FloorMean), num(r.FloorLow), num(r.FloorHigh),
			num(r.GapClosed), num(r.GapLow), num(r.GapHigh), optNum(r.Baseline), optNum(r.Top), strconv.Itoa(r.Retried),
			num(c.AgentHours), num(c.GPUHours), num(c.BilledGPUHours), num(c.WastedGPUHours), num(c.InfraWaitHours),
			strconv.FormatInt(c.LLMCalls, 10), strconv.FormatInt(c.LLMTokens, 10), strconv.FormatFloat(c.LLMUSD, 'f', 4, 64), strconv.FormatFloat(c.ReportedUSD, 'f', 4, 64),
			strconv.FormatFloat(c.GPUUSD, 'f', 4, 64), itoa(c.GPUUnpriced), num(r.MDD)}, append(researchRecord(r.Research), strconv.Itoa(r.Hacked))...))
	}
	cw.Flush()
	return cw.Error()
}

func num(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return ""
	}
	return strconv.FormatFloat(x, 'f', 4, 64)
}

func optNum(x *float64) string {
	if x == nil {
		return ""
	}
	return num(*x)
}

// SuccessCell renders a success rate with its Wilson interval.
func SuccessCell(rate, lo, hi float64) string {
	if math.IsNaN(rate) {
		return "—"
	}
	return fmt.Sprintf("%.0f%% [%.0f, %.0f]", 100*rate, 100*lo, 100*hi)
}

// meanCell is the mean of the scored runs with their number.
func meanCell(r Row) string {
	if r.Scored == 0 {
		return "—"
	}
	return fmt.Sprintf("%.4f (n=%d)", r.Mean, r.Scored)
}

// CICell is the scored mean's interval, named by its method; none under
// two scores.
func CICell(r Row) string {
	if r.Scored < 2 {
		return "— (n<2)"
	}
	return fmt.Sprintf("[%.4f, %.4f] %s", r.CILow, r.CIHigh, r.CIMethod)
}

// floorCell is the mean with the agent's failures at the floor.
func floorCell(r Row) string {
	if r.Counted == 0 {
		return "—"
	}
	s := fmt.Sprintf("%.4f", r.FloorMean)
	if r.Counted >= 2 {
		s += fmt.Sprintf(" [%.4f, %.4f]", r.FloorLow, r.FloorHigh)
	}
	return s
}

// GapCell is a row's gap closed with its interval, flagged when its gap
// is near zero.
func GapCell(r Row) string {
	if r.Baseline == nil || math.IsNaN(r.GapClosed) || math.IsInf(r.GapClosed, 0) {
		return "—"
	}
	s := gapInterval(r.GapClosed, r.GapLow, r.GapHigh)
	if r.NearZeroGap {
		s += " (near-zero gap)"
	}
	return s
}

// gapInterval renders a gap closed and its interval, in percent.
func gapInterval(g, lo, hi float64) string {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return fmt.Sprintf("%.1f", g)
	}
	return fmt.Sprintf("%.1f [%.1f, %.1f]", g, lo, hi)
}

// WriteAgents prints each agent's summary: success rate, gap closed, cost.
func WriteAgents(w io.Writer, as []AgentSummary) {
	fmt.Fprintf(w, "%-24s %5s %-20s %-22s %10s %10s  %s\n", "agent", "runs", "success [95 %]", "gap closed % [95 %]", "GPU h", "LLM $", "certified")
	for _, a := range as {
		gap := "—"
		if a.GapTasks > 0 {
			gap = gapInterval(a.Gap, a.GapLow, a.GapHigh) + fmt.Sprintf(" (%d tasks)", a.GapTasks)
		}
		cert := a.Certified
		if cert == "" {
			cert = "—"
		}
		fmt.Fprintf(w, "%-24s %5d %-20s %-22s %10.3f %10.2f  %s\n", a.Agent, a.Runs, SuccessCell(a.SuccessRate, a.SuccessLow, a.SuccessHigh), gap, a.Cost.GPUHours, a.Cost.LLMUSD, cert)
	}
}

// countsCell is a row's scored/failed/apart, with the failures a
// reviewer's verdict made said so: "1/2/0 (1 hacked)".
// AgentCell is a row's agent as tables show it: a person's says so, with
// their condition.
func AgentCell(r Row) string {
	if r.Human == "" {
		return r.Agent
	}
	return r.Agent + " (person, " + r.Human + ")"
}

func countsCell(r Row) string {
	c := fmt.Sprintf("%d/%d/%d", r.Scored, r.AgentFailed, r.Invalid)
	if r.Hacked > 0 {
		c += fmt.Sprintf(" (%d hacked)", r.Hacked)
	}
	return c
}

// WriteTable prints rows as an aligned text table.
func WriteTable(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "%-26s %-14s %4s %-14s %-16s %-16s %-26s %-26s %-22s %s\n", "task", "agent", "runs", "ok/failed/apart", "success [95 %]", "mean (n scored)", "95% CI of mean", "mean, failures at floor", "gap closed % [95 %]", "MDD (80 %)")
	fmt.Fprintln(w, strings.Repeat("-", 190))
	for _, r := range rows {
		fmt.Fprintf(w, "%-26s %-14s %4d %-14s %-16s %-16s %-26s %-26s %-22s %s\n", r.Task, AgentCell(r), r.Runs, countsCell(r),
			SuccessCell(r.SuccessRate, r.SuccessLow, r.SuccessHigh), meanCell(r), CICell(r), floorCell(r), GapCell(r), num(r.MDD))
	}
}

// Statement is the question the leaderboard's statistics answer.
const Statement = "Tasks are treated as fixed: each interval and test is over seeds within its task. " +
	"A run is scored, the agent's failure (agent_failed, disqualified, hacked by a reviewer's verdict: counted in its success rate, and at the task's floor, its baseline anchor else 0, in the mean with failures, the gap closed and the paired tests), " +
	"or apart (infra and evaluator failures, canceled: never averaged). Intervals of a mean are Student's t below 30 runs, the percentile bootstrap from there; success rates have Wilson's. " +
	"Paired differences are over the seeds both agents ran, Holm-corrected across the tasks an agent pair shares; " +
	"nothing here generalises to tasks outside this benchmark. MDD: the smallest difference from an agent of equal spread the runs detect with 80 % power at α = 0.05 " +
	"(`starter plan` turns it around)."

// PairLine renders a paired comparison on one line.
func PairLine(p Pair) string {
	if p.N < 2 {
		return fmt.Sprintf("%s: %s − %s = %+.4f (n=%d: too few shared seeds to test)", p.Task, p.A, p.B, p.MeanDiff, p.N)
	}
	verdict := "not significant"
	if p.Significant() {
		verdict = "significant"
	}
	return fmt.Sprintf("%s: %s − %s = %+.4f, 95%% CI [%+.4f, %+.4f], p = %.3g, Holm p = %.3g: %s (n=%d shared seeds, MDD %.4f)",
		p.Task, p.A, p.B, p.MeanDiff, p.CILow, p.CIHigh, p.P, p.PHolm, verdict, p.N, p.MDD)
}

// jsonPairs leaves out what is NaN (too few seeds to test).
func jsonPairs(ps []Pair) []map[string]any {
	out := make([]map[string]any, 0, len(ps))
	for _, p := range ps {
		m := map[string]any{"task": p.Task, "a": p.A, "b": p.B, "n": p.N, "mean_diff": p.MeanDiff}
		if p.N >= 2 {
			m["sd"], m["sem"], m["ci95"], m["p"], m["p_holm"], m["mdd"], m["significant"] = p.SD, p.SEM, []float64{p.CILow, p.CIHigh}, p.P, p.PHolm, p.MDD, p.Significant()
		}
		out = append(out, m)
	}
	return out
}
