// The leaderboard's entries and setup.

// Package leaderboard turns run results into per-task summaries. Runs that
// ended without a score (infra or evaluator failures) are counted apart
// and never averaged in as 0.
package leaderboard

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/run/runs"
)

// Entry is what the leaderboard needs of a run result.
type Entry struct {
	RunID   string       `json:"run_id,omitempty"`
	Task    string       `json:"task"`
	Agent   string       `json:"agent"`
	Seed    int64        `json:"seed"`
	Outcome runs.Outcome `json:"outcome"`
	Score   *float64     `json:"score"`
	// Attempts and EvalTries count agent attempts and evaluations: more
	// than one of either means the run was retried.
	Attempts  int `json:"attempts,omitempty"`
	EvalTries int `json:"evaluation_attempts,omitempty"`
	// TimeLimitS and Hardware are the budget and hardware class it ran
	// under ("CPU", "1× A100").
	TimeLimitS float64 `json:"time_limit_s,omitempty"`
	Hardware   string  `json:"hardware,omitempty"`
	Cost       Cost    `json:"cost"`
	// EvaluatorImage names the evaluator that scored it (runs.Result's):
	// the anchors' is compared with it.
	EvaluatorImage string `json:"evaluator_image,omitempty"`
	// Curve is the run's score over time, each mark with its cost by then.
	Curve []Mark `json:"curve,omitempty"`
	// Research is the run's research measures (nil: not observed).
	Research *runs.Measures `json:"research,omitempty"`
	// Human is a person's condition (runs.AgentRef's): their rows say so.
	Human string `json:"human,omitempty"`
	// Flags are the findings of its model's check that do not
	// disqualify it (runs.Result's): the board shows each beside its row.
	Flags []string `json:"flags,omitempty"`
	// Violations are the rules its model broke (a disqualified run's).
	Violations []string `json:"violations,omitempty"`
}

// RunsOf is what the leaderboard needs of run results.
func RunsOf(results []runs.Result) []Entry {
	out := make([]Entry, 0, len(results))
	for _, r := range results {
		out = append(out, Entry{RunID: r.RunID, EvaluatorImage: r.EvaluatorImage, Task: r.Task, Agent: r.Agent, Seed: r.Seed, Outcome: r.Outcome, Score: r.Score,
			Attempts: r.Attempts, EvalTries: r.EvalTries, TimeLimitS: r.TimeLimitS, Hardware: r.Hardware, Cost: r.Cost, Research: r.Research, Curve: r.Curve, Flags: r.Flags, Violations: r.Violations})
		if r.AgentDef != nil {
			out[len(out)-1].Human = r.AgentDef.Human
		}
	}
	return out
}

// Cost is what a run consumed (runs.Cost).
type Cost = runs.Cost

// Mark is a point of a run's curve.
type Mark = runs.Mark

// Total is the cost of a set of runs: hours summed; LLM calls, tokens
// and dollars as the gateway measured them; and, apart, what agents
// reported of themselves (usage.json), which is never the cost.
type Total struct {
	AgentHours     float64 `json:"agent_hours"`
	GPUHours       float64 `json:"gpu_hours"`
	BilledGPUHours float64 `json:"billed_gpu_hours"`
	WastedGPUHours float64 `json:"wasted_gpu_hours"`
	InfraWaitHours float64 `json:"infra_wait_hours"`
	LLMCalls       int64   `json:"llm_calls"`
	LLMTokens      int64   `json:"llm_tokens"`
	LLMUSD         float64 `json:"llm_usd"`
	// GPUUSD is the priced runs' GPU dollars; GPUUnpriced counts the runs
	// whose GPU type had no price.
	GPUUSD      float64 `json:"gpu_usd"`
	GPUUnpriced int     `json:"gpu_unpriced_runs,omitempty"`
	// LLMRateLimitWaitS is how long providers told agents to wait (429).
	LLMRateLimitWaitS float64 `json:"llm_rate_limit_wait_s,omitempty"`
	ReportedTokens    int64   `json:"reported_llm_tokens,omitempty"`
	ReportedUSD       float64 `json:"reported_llm_usd,omitempty"`
}

// Add counts one run's cost in.
func (t *Total) Add(c Cost) {
	t.AgentHours += c.AgentHours
	t.GPUHours += c.GPUHours
	t.BilledGPUHours += c.BilledGPUHours
	t.WastedGPUHours += c.WastedGPUHours
	t.InfraWaitHours += c.InfraWaitHours
	if c.GPUUSD == nil {
		t.GPUUnpriced++
	} else if *c.GPUUSD > 0 && !math.IsInf(*c.GPUUSD, 0) {
		t.GPUUSD = min(t.GPUUSD+*c.GPUUSD, math.MaxFloat64)
	}
	// What agents report is checked where it is read; a stored result
	// from before (or edited since) still never makes a sum negative,
	// infinite or wrapped.
	for _, n := range []*int64{c.LLMInputTokens, c.LLMOutputTokens} {
		if n != nil && *n > 0 {
			t.ReportedTokens = satAdd(t.ReportedTokens, *n)
		}
	}
	if c.LLMUSD != nil && *c.LLMUSD > 0 && !math.IsInf(*c.LLMUSD, 0) {
		t.ReportedUSD = min(t.ReportedUSD+*c.LLMUSD, math.MaxFloat64)
	}
	if l := c.LLM; l != nil {
		t.LLMCalls = satAdd(t.LLMCalls, max(l.Calls, 0))
		t.LLMTokens = satAdd(t.LLMTokens, max(l.Tokens.Total(), 0))
		if l.USD > 0 && !math.IsInf(l.USD, 0) {
			t.LLMUSD = min(t.LLMUSD+l.USD, math.MaxFloat64)
		}
		t.LLMRateLimitWaitS += max(l.RateLimitWaitS, 0)
	}
}

// add sums another total in.
func (t *Total) add(o Total) {
	t.AgentHours += o.AgentHours
	t.GPUHours += o.GPUHours
	t.BilledGPUHours += o.BilledGPUHours
	t.WastedGPUHours += o.WastedGPUHours
	t.InfraWaitHours += o.InfraWaitHours
	t.LLMCalls = satAdd(t.LLMCalls, o.LLMCalls)
	t.LLMTokens = satAdd(t.LLMTokens, o.LLMTokens)
	t.LLMUSD = min(t.LLMUSD+o.LLMUSD, math.MaxFloat64)
	t.GPUUSD = min(t.GPUUSD+o.GPUUSD, math.MaxFloat64)
	t.GPUUnpriced += o.GPUUnpriced
	t.LLMRateLimitWaitS += o.LLMRateLimitWaitS
	t.ReportedTokens = satAdd(t.ReportedTokens, o.ReportedTokens)
	t.ReportedUSD = min(t.ReportedUSD+o.ReportedUSD, math.MaxFloat64)
}

// satAdd adds two non-negative counts, stopping at the largest.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// CostOf sums the cost of runs.
func CostOf(runs []Entry) Total {
	var t Total
	for _, r := range runs {
		t.Add(r.Cost)
	}
	return t
}

// Line renders a total as the leaderboard's cost line.
func (t Total) Line() string {
	line := fmt.Sprintf("cost: %.3f agent h, %.3f GPU h used by agents of %.3f GPU h billed (hosts held, boot and idle included), %.3f GPU h wasted by crashes, %.3f h infra wait, %d LLM calls, %d LLM tokens, $%.2f LLM (measured at the gateway)",
		t.AgentHours, t.GPUHours, t.BilledGPUHours, t.WastedGPUHours, t.InfraWaitHours, t.LLMCalls, t.LLMTokens, t.LLMUSD)
	if t.ReportedTokens > 0 || t.ReportedUSD > 0 {
		line += fmt.Sprintf("; agents reported %d tokens, $%.2f", t.ReportedTokens, t.ReportedUSD)
	}
	line += fmt.Sprintf("; $%.2f GPU (billed GPU h at the GPU price table)", t.GPUUSD)
	if t.GPUUnpriced > 0 {
		line += fmt.Sprintf(", and %d runs whose GPUs have no price", t.GPUUnpriced)
	}
	return line
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
	// Anchors are the tasks' baseline and top scores, where known: each
	// row's gap closed is measured against them.
	Anchors map[string]Anchor `json:"anchors,omitempty"`
	// Certified is each agent's certification (`starter certify`), as a
	// line: read when the board is shown, never stored with it.
	Certified map[string]string `json:"-"`
	// Terse leaves where each anchor comes from (its runs and evaluator
	// digests, a few hundred characters a task) out of the table format,
	// which then ends with what a reader acts on; the other formats and
	// the report keep it.
	Terse bool `json:"-"`
}

// TaskSetup is one task's budget and hardware class.
type TaskSetup struct {
	TimeLimitS float64 `json:"time_limit_s"`
	Hardware   string  `json:"hardware"`
}

// SetupOf collects the setup of a benchmark's runs.
func SetupOf(runs []Entry, p Policy) Setup {
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
