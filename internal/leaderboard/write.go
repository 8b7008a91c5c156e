package leaderboard

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Formats are the renderings Write knows.
var Formats = []string{"table", "md", "csv", "json", "svg"}

// Write renders the leaderboard of a benchmark's runs in one of Formats.
// The aggregate activity stores it and `starter results` prints it, so
// both always show the same thing.
func Write(w io.Writer, format, benchmarkID string, runs []Run, setup Setup) error {
	rows := WithAnchors(Summarise(runs), setup.Anchors)
	cost := CostOf(runs)
	notes := append(append([]string{cost.Line()}, setup.lines()...), gapLines(rows, setup.Anchors)...)
	notes = append(notes, Statement)
	switch format {
	case "table":
		WriteTable(w, rows)
		for _, p := range Paired(runs) {
			fmt.Fprintln(w, "paired "+PairLine(p))
		}
		for _, l := range notes {
			fmt.Fprintln(w, l)
		}
		return nil
	case "md":
		WriteMarkdown(w, rows)
		fmt.Fprintln(w)
		for _, p := range Paired(runs) {
			fmt.Fprintf(w, "- paired %s\n", PairLine(p))
		}
		for _, l := range notes {
			fmt.Fprintf(w, "- %s\n", l)
		}
		return nil
	case "csv":
		return WriteCSV(w, rows)
	case "svg":
		return WriteSVG(w, rows, append(gapRows(rows), notes...))
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"benchmark_id": benchmarkID, "rows": jsonRows(rows), "paired": jsonPairs(Paired(runs)), "runs": runs, "setup": setup, "cost": cost,
			"gap_closed_means": GapMeans(rows), "tasks": "fixed", "statement": Statement})
	}
	return fmt.Errorf("format %q is not one of %s", format, strings.Join(Formats, ", "))
}

// jsonRows leaves out the statistics of a row with no score: JSON has no
// NaN, and 0 would read as a score.
func jsonRows(rows []Row) []map[string]any {
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		m := map[string]any{"task": r.Task, "agent": r.Agent, "runs": r.Runs, "scored": r.Scored, "invalid": r.Invalid, "disqualified": r.Disqualified, "retried": r.Retried, "cost": r.Cost}
		if r.Scored > 0 {
			m["mean"], m["std"], m["sem"], m["ci95"], m["min"], m["max"] = r.Mean, r.Std, r.SEM, []float64{r.CILow, r.CIHigh}, r.Min, r.Max
			if !math.IsNaN(r.MDD) {
				m["mdd"] = r.MDD
			}
		}
		if r.Baseline != nil {
			m["baseline"], m["top"], m["near_zero_gap"] = *r.Baseline, *r.Top, r.NearZeroGap
		}
		if !math.IsNaN(r.GapClosed) && !math.IsInf(r.GapClosed, 0) {
			m["gap_closed_pct"] = r.GapClosed
		}
		out = append(out, m)
	}
	return out
}

// WriteMarkdown prints rows as a Markdown table.
func WriteMarkdown(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| task | agent | runs | scored | invalid (disqualified) / retried | mean | gap closed % | std | SEM | 95% CI (bootstrap) | min | max | GPU h used / billed | MDD (80 %) |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d (%d) / %d | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |\n", r.Task, r.Agent, r.Runs, r.Scored, r.Invalid, r.Disqualified, r.Retried,
			num(r.Mean), gapCell(r), num(r.Std), num(r.SEM), ci(r), num(r.Min), num(r.Max), num(r.Cost.GPUHours), num(r.Cost.BilledGPUHours), num(r.MDD))
	}
}

// WriteCSV prints rows as CSV.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"task", "agent", "runs", "scored", "invalid", "disqualified", "mean", "gap_closed_pct", "baseline", "top", "std", "sem", "ci95_low", "ci95_high", "min", "max", "retried",
		"agent_hours", "gpu_hours", "billed_gpu_hours", "wasted_gpu_hours", "infra_wait_hours", "llm_calls", "llm_tokens", "llm_usd", "reported_llm_usd", "mdd"})
	for _, r := range rows {
		c := r.Cost
		_ = cw.Write([]string{r.Task, r.Agent, strconv.Itoa(r.Runs), strconv.Itoa(r.Scored), strconv.Itoa(r.Invalid), strconv.Itoa(r.Disqualified),
			num(r.Mean), num(r.GapClosed), optNum(r.Baseline), optNum(r.Top), num(r.Std), num(r.SEM), num(r.CILow), num(r.CIHigh), num(r.Min), num(r.Max), strconv.Itoa(r.Retried),
			num(c.AgentHours), num(c.GPUHours), num(c.BilledGPUHours), num(c.WastedGPUHours), num(c.InfraWaitHours),
			strconv.FormatInt(c.LLMCalls, 10), strconv.FormatInt(c.LLMTokens, 10), strconv.FormatFloat(c.LLMUSD, 'f', 4, 64), strconv.FormatFloat(c.ReportedUSD, 'f', 4, 64), num(r.MDD)})
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

func ci(r Row) string {
	if r.Scored == 0 {
		return ""
	}
	return fmt.Sprintf("[%s, %s]", num(r.CILow), num(r.CIHigh))
}

func optNum(x *float64) string {
	if x == nil {
		return ""
	}
	return num(*x)
}

// gapCell is a row's gap closed, flagged when its gap is near zero.
func gapCell(r Row) string {
	s := strconv.FormatFloat(r.GapClosed, 'f', 1, 64)
	switch {
	case r.Baseline == nil || math.IsNaN(r.GapClosed) || math.IsInf(r.GapClosed, 0):
		return "—"
	case r.NearZeroGap:
		return s + " (near-zero gap)"
	}
	return s
}

// WriteTable prints rows as an aligned text table.
func WriteTable(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "%-28s %-10s %4s %6s %19s  %-17s %-12s %-7s %-18s %s\n", "task", "agent", "runs", "scored", "invalid (dq)/retried", "mean ± std", "gap closed %", "SEM", "95% CI (bootstrap)", "MDD (80 %)")
	fmt.Fprintln(w, strings.Repeat("-", 136))
	for _, r := range rows {
		ms := "—"
		if r.Scored > 0 {
			ms = fmt.Sprintf("%.4f ± %.4f", r.Mean, r.Std)
		}
		fmt.Fprintf(w, "%-28s %-10s %4d %6d %19s  %-17s %-12s %-7s %-18s %s\n", r.Task, r.Agent, r.Runs, r.Scored, fmt.Sprintf("%d (%d) / %d", r.Invalid, r.Disqualified, r.Retried), ms, gapCell(r), num(r.SEM), ci(r), num(r.MDD))
	}
}

// Statement is the question the leaderboard's statistics answer.
const Statement = "Tasks are treated as fixed: each interval and test is over seeds within its task (runs with a score only), " +
	"paired differences over the seeds both agents ran, Holm-corrected across the tasks an agent pair shares; " +
	"nothing here generalises to tasks outside this benchmark. MDD: the smallest difference the seeds detect with 80 % power at α = 0.05 " +
	"(n ≈ 15.7·σ²/δ² + 1; `starter plan` turns it around)."

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
