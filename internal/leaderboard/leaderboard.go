// Package leaderboard turns run results into per-task summaries. Runs that
// ended without a score (infra or evaluator failures) are counted apart
// and never averaged in as 0.
package leaderboard

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Run is what the leaderboard needs of a run result.
type Run struct {
	Task    string   `json:"task"`
	Agent   string   `json:"agent"`
	Seed    int64    `json:"seed"`
	Outcome string   `json:"outcome"`
	Score   *float64 `json:"score"`
	// Attempts and EvalTries count agent attempts and evaluations: more
	// than one of either means the run was retried.
	Attempts  int `json:"attempts,omitempty"`
	EvalTries int `json:"evaluation_attempts,omitempty"`
	// TimeLimitS and Hardware are the budget and hardware class it ran
	// under ("CPU", "1× A100").
	TimeLimitS float64 `json:"time_limit_s,omitempty"`
	Hardware   string  `json:"hardware,omitempty"`
	Cost       Cost    `json:"cost"`
}

// Cost is what a run consumed: agent and GPU hours from its ledger, GPU
// hours lost to crashes, GPU hours billed, and the LLM usage the agent
// reported, when it did.
type Cost struct {
	AgentHours     float64 `json:"agent_hours"`
	GPUHours       float64 `json:"gpu_hours"`
	InfraWaitHours float64 `json:"infra_wait_hours"`
	WastedGPUHours float64 `json:"wasted_gpu_hours"`
	// BilledGPUHours is GPU time held for the run, whether used or not:
	// provisioned hosts from their start (boot and idle included) to
	// their release, static hosts for the time their slot was leased.
	BilledGPUHours  float64  `json:"billed_gpu_hours"`
	LLMInputTokens  *int64   `json:"llm_input_tokens,omitempty"`
	LLMOutputTokens *int64   `json:"llm_output_tokens,omitempty"`
	LLMUSD          *float64 `json:"llm_usd,omitempty"`
}

// Total is the cost of a set of runs: hours summed, LLM tokens and
// dollars summed over the runs that reported them.
type Total struct {
	AgentHours     float64 `json:"agent_hours"`
	GPUHours       float64 `json:"gpu_hours"`
	BilledGPUHours float64 `json:"billed_gpu_hours"`
	WastedGPUHours float64 `json:"wasted_gpu_hours"`
	InfraWaitHours float64 `json:"infra_wait_hours"`
	LLMTokens      int64   `json:"llm_tokens"`
	LLMUSD         float64 `json:"llm_usd"`
}

// Add counts one run's cost in.
func (t *Total) Add(c Cost) {
	t.AgentHours += c.AgentHours
	t.GPUHours += c.GPUHours
	t.BilledGPUHours += c.BilledGPUHours
	t.WastedGPUHours += c.WastedGPUHours
	t.InfraWaitHours += c.InfraWaitHours
	// What agents report is checked where it is read; a stored result
	// from before (or edited since) still never makes a sum negative,
	// infinite or wrapped.
	for _, n := range []*int64{c.LLMInputTokens, c.LLMOutputTokens} {
		if n != nil && *n > 0 {
			t.LLMTokens = satAdd(t.LLMTokens, *n)
		}
	}
	if c.LLMUSD != nil && *c.LLMUSD > 0 && !math.IsInf(*c.LLMUSD, 0) {
		t.LLMUSD = min(t.LLMUSD+*c.LLMUSD, math.MaxFloat64)
	}
}

// satAdd adds two non-negative counts, stopping at the largest.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// CostOf sums the cost of runs.
func CostOf(runs []Run) Total {
	var t Total
	for _, r := range runs {
		t.Add(r.Cost)
	}
	return t
}

// Line renders a total as the leaderboard's cost line.
func (t Total) Line() string {
	return fmt.Sprintf("cost: %.3f agent h, %.3f GPU h used by agents of %.3f GPU h billed (hosts held, boot and idle included), %.3f GPU h wasted by crashes, %.3f h infra wait, %d LLM tokens, $%.2f reported",
		t.AgentHours, t.GPUHours, t.BilledGPUHours, t.WastedGPUHours, t.InfraWaitHours, t.LLMTokens, t.LLMUSD)
}

// Policy is the part of the budget policy that is the same for every run
// of a benchmark.
type Policy struct {
	CheckpointInterval string `json:"checkpoint_interval"`
	MaxInfraAttempts   int    `json:"max_infra_attempts"`
	EvalAttempts       int    `json:"evaluation_attempts"`
}

// Setup is what the scores were obtained under, stored with them: scores
// compare only under the same budgets, hardware and policy.
type Setup struct {
	Policy Policy `json:"policy"`
	// Tasks maps each task to its budget and hardware class.
	Tasks map[string]TaskSetup `json:"tasks"`
}

// TaskSetup is one task's budget and hardware class.
type TaskSetup struct {
	TimeLimitS float64 `json:"time_limit_s"`
	Hardware   string  `json:"hardware"`
}

// SetupOf collects the setup of a benchmark's runs.
func SetupOf(runs []Run, p Policy) Setup {
	s := Setup{Policy: p, Tasks: map[string]TaskSetup{}}
	for _, r := range runs {
		if r.Hardware != "" {
			s.Tasks[r.Task] = TaskSetup{TimeLimitS: r.TimeLimitS, Hardware: r.Hardware}
		}
	}
	return s
}

// lines renders the setup, tasks grouped by budget and hardware.
func (s Setup) lines() []string {
	groups := map[string][]string{}
	for t, ts := range s.Tasks {
		k := fmt.Sprintf("%s on %s", time.Duration(ts.TimeLimitS*float64(time.Second)), ts.Hardware)
		groups[k] = append(groups[k], t)
	}
	var out []string
	for k, ts := range groups {
		sort.Strings(ts)
		out = append(out, fmt.Sprintf("budget %s: %s", k, strings.Join(ts, ", ")))
	}
	sort.Strings(out)
	return append(out, fmt.Sprintf("policy: checkpoint every %s, up to %d infra attempts per run, %d evaluation attempts before a run waits for retry-eval",
		s.Policy.CheckpointInterval, s.Policy.MaxInfraAttempts, s.Policy.EvalAttempts))
}

// Row summarises one task × agent.
type Row struct {
	Task    string  `json:"task"`
	Agent   string  `json:"agent"`
	Runs    int     `json:"runs"`
	Scored  int     `json:"scored"`  // runs with a score (scored or limit_reached)
	Invalid int     `json:"invalid"` // runs without a score: never averaged as 0
	Retried int     `json:"retried"` // runs that took more than one agent attempt or evaluation
	Mean    float64 `json:"mean"`
	Std     float64 `json:"std"` // sample standard deviation of the scores
	SEM     float64 `json:"sem"` // standard error of the mean: std / sqrt(n)
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	// CILow and CIHigh bound a 95 % bootstrap interval of the mean.
	CILow  float64 `json:"ci95_low"`
	CIHigh float64 `json:"ci95_high"`
	// Cost is what the group's runs consumed.
	Cost Total `json:"cost"`
}

// Summarise groups runs by task and agent.
func Summarise(runs []Run) []Row {
	type key struct{ task, agent string }
	groups := map[key][]Run{}
	for _, r := range runs {
		k := key{r.Task, r.Agent}
		groups[k] = append(groups[k], r)
	}
	var rows []Row
	for k, rs := range groups {
		row := Row{Task: k.task, Agent: k.agent, Runs: len(rs), Min: math.Inf(1), Max: math.Inf(-1)}
		var xs []float64
		for _, r := range rs {
			row.Cost.Add(r.Cost)
			if r.Attempts > 1 || r.EvalTries > 1 {
				row.Retried++
			}
			if r.Score == nil {
				row.Invalid++
				continue
			}
			xs = append(xs, *r.Score)
			row.Min = math.Min(row.Min, *r.Score)
			row.Max = math.Max(row.Max, *r.Score)
		}
		row.Scored = len(xs)
		row.Mean, row.Std = MeanStd(xs)
		if row.Scored > 0 {
			row.SEM = row.Std / math.Sqrt(float64(row.Scored))
			row.CILow, row.CIHigh = BootstrapCI(xs, 2000, 0.95, 42)
		} else {
			row.Min, row.Max, row.SEM, row.CILow, row.CIHigh = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Task != rows[j].Task {
			return rows[i].Task < rows[j].Task
		}
		return rows[i].Agent < rows[j].Agent
	})
	return rows
}

// MeanStd returns the mean and the sample standard deviation (n-1).
func MeanStd(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// BootstrapCI is the percentile bootstrap interval of the mean: resample
// with replacement, seeded so that a leaderboard is reproducible.
func BootstrapCI(xs []float64, resamples int, level float64, seed uint64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	r := rand.New(rand.NewPCG(seed, uint64(len(xs))))
	means := make([]float64, resamples)
	for i := range means {
		sum := 0.0
		for range xs {
			sum += xs[r.IntN(len(xs))]
		}
		means[i] = sum / float64(len(xs))
	}
	sort.Float64s(means)
	lo := int(math.Floor((1 - level) / 2 * float64(resamples)))
	hi := int(math.Ceil((1+level)/2*float64(resamples))) - 1
	return means[lo], means[min(hi, resamples-1)]
}

// Pair compares two agents on the runs they share (same task and seed,
// both scored).
type Pair struct {
	Task     string  `json:"task"`
	A        string  `json:"a"`
	B        string  `json:"b"`
	N        int     `json:"n"`
	MeanDiff float64 `json:"mean_diff"` // A - B
	SEM      float64 `json:"sem"`
}

// Paired computes the paired difference for every pair of agents per task.
func Paired(runs []Run) []Pair {
	by := map[string]map[string]map[int64]float64{} // task -> agent -> seed -> score
	for _, r := range runs {
		if r.Score == nil {
			continue
		}
		if by[r.Task] == nil {
			by[r.Task] = map[string]map[int64]float64{}
		}
		if by[r.Task][r.Agent] == nil {
			by[r.Task][r.Agent] = map[int64]float64{}
		}
		by[r.Task][r.Agent][r.Seed] = *r.Score
	}
	var out []Pair
	tasks := make([]string, 0, len(by))
	for t := range by {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	for _, t := range tasks {
		agents := make([]string, 0, len(by[t]))
		for a := range by[t] {
			agents = append(agents, a)
		}
		sort.Strings(agents)
		for i := range agents {
			for j := i + 1; j < len(agents); j++ {
				var d []float64
				for seed, x := range by[t][agents[i]] {
					if y, ok := by[t][agents[j]][seed]; ok {
						d = append(d, x-y)
					}
				}
				if len(d) == 0 {
					continue
				}
				sort.Float64s(d)
				m, s := MeanStd(d)
				out = append(out, Pair{Task: t, A: agents[i], B: agents[j], N: len(d), MeanDiff: m, SEM: s / math.Sqrt(float64(len(d)))})
			}
		}
	}
	return out
}

// Formats are the renderings Write knows.
var Formats = []string{"table", "md", "csv", "json", "svg"}

// Write renders the leaderboard of a benchmark's runs in one of Formats.
// The aggregate activity stores it and `starter results` prints it, so
// both always show the same thing.
func Write(w io.Writer, format, benchmarkID string, runs []Run, setup Setup) error {
	rows := Summarise(runs)
	cost := CostOf(runs)
	notes := append([]string{cost.Line()}, setup.lines()...)
	switch format {
	case "table":
		WriteTable(w, rows)
		for _, p := range Paired(runs) {
			fmt.Fprintf(w, "paired %s: %s − %s = %+.4f ± %.4f (SEM, n=%d)\n", p.Task, p.A, p.B, p.MeanDiff, p.SEM, p.N)
		}
		for _, l := range notes {
			fmt.Fprintln(w, l)
		}
		return nil
	case "md":
		WriteMarkdown(w, rows)
		fmt.Fprintln(w)
		for _, l := range notes {
			fmt.Fprintf(w, "- %s\n", l)
		}
		return nil
	case "csv":
		return WriteCSV(w, rows)
	case "svg":
		return WriteSVG(w, rows, notes)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"benchmark_id": benchmarkID, "rows": jsonRows(rows), "paired": Paired(runs), "runs": runs, "setup": setup, "cost": cost})
	}
	return fmt.Errorf("format %q is not one of %s", format, strings.Join(Formats, ", "))
}

// jsonRows leaves out the statistics of a row with no score: JSON has no
// NaN, and 0 would read as a score.
func jsonRows(rows []Row) []map[string]any {
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		m := map[string]any{"task": r.Task, "agent": r.Agent, "runs": r.Runs, "scored": r.Scored, "invalid": r.Invalid, "retried": r.Retried, "cost": r.Cost}
		if r.Scored > 0 {
			m["mean"], m["std"], m["sem"], m["ci95"], m["min"], m["max"] = r.Mean, r.Std, r.SEM, []float64{r.CILow, r.CIHigh}, r.Min, r.Max
		}
		out = append(out, m)
	}
	return out
}

// WriteMarkdown prints rows as a Markdown table.
func WriteMarkdown(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| task | agent | runs | scored | invalid / retried | mean | std | SEM | 95% CI (bootstrap) | min | max | GPU h used / billed |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d / %d | %s | %s | %s | %s | %s | %s | %s / %s |\n", r.Task, r.Agent, r.Runs, r.Scored, r.Invalid, r.Retried,
			num(r.Mean), num(r.Std), num(r.SEM), ci(r), num(r.Min), num(r.Max), num(r.Cost.GPUHours), num(r.Cost.BilledGPUHours))
	}
}

// WriteCSV prints rows as CSV.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"task", "agent", "runs", "scored", "invalid", "mean", "std", "sem", "ci95_low", "ci95_high", "min", "max", "retried",
		"agent_hours", "gpu_hours", "billed_gpu_hours", "wasted_gpu_hours", "infra_wait_hours", "llm_tokens", "llm_usd"})
	for _, r := range rows {
		c := r.Cost
		_ = cw.Write([]string{r.Task, r.Agent, strconv.Itoa(r.Runs), strconv.Itoa(r.Scored), strconv.Itoa(r.Invalid),
			num(r.Mean), num(r.Std), num(r.SEM), num(r.CILow), num(r.CIHigh), num(r.Min), num(r.Max), strconv.Itoa(r.Retried),
			num(c.AgentHours), num(c.GPUHours), num(c.BilledGPUHours), num(c.WastedGPUHours), num(c.InfraWaitHours),
			strconv.FormatInt(c.LLMTokens, 10), strconv.FormatFloat(c.LLMUSD, 'f', 2, 64)})
	}
	cw.Flush()
	return cw.Error()
}

func num(x float64) string {
	if math.IsNaN(x) {
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

// WriteTable prints rows as an aligned text table.
func WriteTable(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "%-28s %-10s %4s %6s %15s  %-17s %-7s %s\n", "task", "agent", "runs", "scored", "invalid/retried", "mean ± std", "SEM", "95% CI (bootstrap)")
	fmt.Fprintln(w, strings.Repeat("-", 112))
	for _, r := range rows {
		ms := "—"
		if r.Scored > 0 {
			ms = fmt.Sprintf("%.4f ± %.4f", r.Mean, r.Std)
		}
		fmt.Fprintf(w, "%-28s %-10s %4d %6d %15s  %-17s %-7s %s\n", r.Task, r.Agent, r.Runs, r.Scored, fmt.Sprintf("%d / %d", r.Invalid, r.Retried), ms, num(r.SEM), ci(r))
	}
}
