package leaderboard

import (
	"encoding/json"
	"encoding/xml"
	"math"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
)

func f(x float64) *float64 { return &x }

func TestSummariseKeepsInvalidApart(t *testing.T) {
	rows := Summarise([]Entry{
		{Task: "t", Agent: "a", Outcome: "scored", Score: f(0.5)},
		{Task: "t", Agent: "a", Outcome: "scored", Score: f(0.7)},
		{Task: "t", Agent: "a", Outcome: "limit_reached", Score: f(0.9)},
		{Task: "t", Agent: "a", Outcome: "infra_failed"},
		{Task: "u", Agent: "a", Outcome: "evaluation_failed"},
	}, nil)
	if len(rows) != 2 {
		t.Fatalf("rows = %+v", rows)
	}
	r := rows[0]
	// Hand computed: mean 0.7; deviations -0.2, 0, 0.2; sum of squares 0.08; /2 = 0.04; sqrt = 0.2.
	// SEM = 0.2 / sqrt(3).
	if r.Runs != 4 || r.Scored != 3 || r.Invalid != 1 || math.Abs(r.Mean-0.7) > 1e-12 || math.Abs(r.Std-0.2) > 1e-12 || r.Min != 0.5 || r.Max != 0.9 ||
		math.Abs(r.SEM-0.2/math.Sqrt(3)) > 1e-12 || r.CIMethod != "t" || !near(r.CIHigh-r.CILow, 2*4.302653*0.2/math.Sqrt(3), 1e-5) {
		t.Fatalf("row = %+v", r)
	}
	if rows[1].Scored != 0 || !math.IsNaN(rows[1].Mean) {
		t.Fatalf("a task with no scores must have no mean, got %+v", rows[1])
	}
}

func TestBootstrapCI(t *testing.T) {
	xs := []float64{0.41, 0.45, 0.52, 0.55, 0.61}
	lo, hi := BootstrapCI(xs, 2000, 0.95, 42)
	lo2, hi2 := BootstrapCI(xs, 2000, 0.95, 42)
	if lo != lo2 || hi != hi2 {
		t.Fatal("a seeded bootstrap must be reproducible")
	}
	// The mean is 0.508; the normal-theory interval is 0.508 ± 1.96 × 0.0359
	// = [0.438, 0.578]; the bootstrap one (n-1 free) is a bit narrower.
	if lo < 0.43 || lo > 0.47 || hi < 0.55 || hi > 0.58 {
		t.Fatalf("95%% CI = [%.4f, %.4f]", lo, hi)
	}
	if lo, hi := BootstrapCI([]float64{0.7}, 100, 0.95, 1); lo != 0.7 || hi != 0.7 {
		t.Fatalf("one run: [%v, %v]", lo, hi)
	}
}

func TestPaired(t *testing.T) {
	runs := []Entry{
		{Task: "t", Agent: "a", Seed: 1, Score: f(0.6)}, {Task: "t", Agent: "b", Seed: 1, Score: f(0.5)},
		{Task: "t", Agent: "a", Seed: 2, Score: f(0.8)}, {Task: "t", Agent: "b", Seed: 2, Score: f(0.5)},
		{Task: "t", Agent: "a", Seed: 3, Score: f(0.9)}, {Task: "t", Agent: "b", Seed: 3}, // b's seed 3 is invalid: not paired
	}
	p := Paired(runs, nil)
	if len(p) != 1 || p[0].N != 2 || math.Abs(p[0].MeanDiff-0.2) > 1e-12 || math.Abs(p[0].SEM-0.1) > 1e-9 /* diffs 0.1, 0.3: std 0.1414, SEM 0.1 */ {
		t.Fatalf("paired = %+v", p)
	}
}

func TestSVG(t *testing.T) {
	var b strings.Builder
	rows := Summarise([]Entry{{Task: "t<1>", Agent: "a", Score: f(0.5)}, {Task: "t<1>", Agent: "a", Score: f(0.7)}, {Task: "u", Agent: "b"}}, nil)
	if err := WriteSVG(&b, rows); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal([]byte(b.String()), new(struct{})); err != nil {
		t.Fatalf("not well-formed SVG: %v", err)
	}
	// One bar (u has no score: no bar, not a bar at 0) and two legend keys.
	if strings.Count(b.String(), "<rect") != 3 || strings.Contains(b.String(), "u / b") || !strings.Contains(b.String(), "t&lt;1&gt;") {
		t.Fatalf("svg:\n%s", b.String())
	}
}

// TestSetupAndRetries: the leaderboard carries the budget, hardware and
// policy it was obtained under, and counts retried runs apart from invalid.
func TestSetupAndRetries(t *testing.T) {
	runs := []Entry{
		{Task: "t", Agent: "a", Seed: 1, Score: f(0.5), Attempts: 2, EvalTries: 1, TimeLimitS: 86400, Hardware: "1× A100"},
		{Task: "t", Agent: "a", Seed: 2, Score: f(0.7), Attempts: 1, EvalTries: 3, TimeLimitS: 86400, Hardware: "1× A100"},
		{Task: "t", Agent: "a", Seed: 3, Outcome: "infra_failed", Attempts: 3, TimeLimitS: 86400, Hardware: "1× A100"},
		{Task: "u", Agent: "a", Seed: 1, Score: f(0.9), Attempts: 1, EvalTries: 1, TimeLimitS: 30, Hardware: "CPU"},
	}
	rows := Summarise(runs, nil)
	if rows[0].Invalid != 1 || rows[0].Retried != 3 || rows[1].Retried != 0 {
		t.Fatalf("rows = %+v", rows)
	}
	setup := SetupOf(runs, Policy{CheckpointInterval: "10m0s", MaxInfraAttempts: 3, EvalAttempts: 3})
	var b strings.Builder
	if err := Write(&b, "table", "x", Build(runs, setup)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2/0/1", "budget 24h0m0s on 1× A100: t", "budget 30s on CPU: u", "up to 3 infra attempts"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("table has no %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := Write(&b, "json", "x", Build(runs, setup)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Setup Setup `json:"setup"`
	}
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil || doc.Setup.Tasks["t"].Hardware != "1× A100" || doc.Setup.Policy.MaxInfraAttempts != 3 {
		t.Fatalf("json setup = %+v (%v)", doc.Setup, err)
	}
}

// Every stored format carries the cost beside the scores: GPU hours the
// agents used and GPU hours billed, per task and agent and in all.
func TestCostInEveryFormat(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	tokens, usd := int64(1200), 2.5
	runs := []Entry{
		{Task: "t", Agent: "a", Seed: 1, Score: f(0.5), Cost: Cost{AgentHours: 1, GPUHours: 1, BilledGPUHours: 1.25, LLMInputTokens: &tokens, LLMUSD: &usd,
			LLM: &llm.Ledger{Usage: llm.Usage{Calls: 7, USD: 3.75, Tokens: llm.Tokens{Input: 900, CacheRead: 100, Output: 500}}}}},
		{Task: "t", Agent: "a", Seed: 2, Outcome: "infra_failed", Cost: Cost{AgentHours: 0.5, GPUHours: 0.5, BilledGPUHours: 2, WastedGPUHours: 0.25}},
	}
	if rows := Summarise(runs, nil); rows[0].Cost.BilledGPUHours != 3.25 || rows[0].Cost.GPUHours != 1.5 || rows[0].Cost.LLMTokens != 1500 || rows[0].Cost.ReportedTokens != 1200 {
		t.Fatalf("row cost = %+v", rows[0].Cost)
	}
	want := map[string][]string{
		"table": {"1.500 GPU h used by agents of 3.250 GPU h billed", "0.250 GPU h wasted", "7 LLM calls, 1500 LLM tokens, $3.75 LLM (measured at the gateway); agents reported 1200 tokens, $2.50"},
		"md":    {"GPU h used / billed", "| 1.5000 / 3.2500 |", "- cost: 1.500 agent h"},
		"csv":   {"gpu_hours,billed_gpu_hours", ",1.5000,3.2500,0.2500,", ",7,1500,3.7500,2.5000"},
		"json":  {`"billed_gpu_hours": 3.25`, `"llm_usd": 3.75`, `"reported_llm_usd": 2.5`},
	}
	for format, subs := range want {
		var b strings.Builder
		if err := Write(&b, format, "x", Build(runs, Setup{})); err != nil {
			t.Fatal(err)
		}
		for _, s := range subs {
			if !strings.Contains(b.String(), s) {
				t.Errorf("%s has no %q:\n%s", format, s, b.String())
			}
		}
	}
}

// TestInfiniteCostNeverBreaksTheLeaderboard is audit #15: two runs that
// reported $1e308 summed to +Inf and the JSON leaderboard could not be
// written at all; negative costs and tokens were summed in. Sums stay
// finite, non-negative and unwrapped in every format.
func TestInfiniteCostNeverBreaksTheLeaderboard(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	i := func(x int64) *int64 { return &x }
	runs := []Entry{
		{Task: "t", Agent: "a", Seed: 1, Score: f(0.5), Cost: Cost{LLMUSD: f(1e308), LLMInputTokens: i(math.MaxInt64 - 1)}},
		{Task: "t", Agent: "a", Seed: 2, Score: f(0.6), Cost: Cost{LLMUSD: f(1e308), LLMInputTokens: i(10)}},
		{Task: "t", Agent: "a", Seed: 3, Score: f(0.7), Cost: Cost{LLMUSD: f(-1e6), LLMOutputTokens: i(-5)}},
		{Task: "t", Agent: "a", Seed: 4, Score: f(0.7), Cost: Cost{LLM: &llm.Ledger{Usage: llm.Usage{Calls: -3, USD: 1e308, Tokens: llm.Tokens{Output: math.MaxInt64}}}}},
		{Task: "t", Agent: "a", Seed: 5, Score: f(0.7), Cost: Cost{LLM: &llm.Ledger{Usage: llm.Usage{USD: 1e308, Tokens: llm.Tokens{Output: 10}}}}},
	}
	for _, format := range []string{"json", "table", "md", "csv", "svg"} {
		var b strings.Builder
		if err := Write(&b, format, "x", Build(runs, Setup{})); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		// JSON keeps each run's record as stored; sums are checked below.
		if format != "json" && strings.Contains(b.String(), "-1000000") || strings.Contains(b.String(), "Inf") {
			t.Errorf("%s shows a negative or infinite cost:\n%s", format, b.String())
		}
	}
	c := CostOf(runs)
	if math.IsInf(c.ReportedUSD, 0) || c.ReportedUSD < 0 || c.ReportedTokens != math.MaxInt64 || math.IsInf(c.LLMUSD, 0) || c.LLMTokens != math.MaxInt64 || c.LLMCalls != 0 {
		t.Fatalf("total = %+v", c)
	}
}

// TestDisqualifiedRunsCountAsFailures: a disqualified run is in the run
// count, not in the scored count ("2 of 3 succeeded") and not in the mean.
func TestDisqualifiedRunsCountAsFailures(t *testing.T) {
	one, two := 0.5, 0.7
	rows := Summarise([]Entry{
		{Task: "t", Agent: "a", Seed: 1, Outcome: "scored", Score: &one},
		{Task: "t", Agent: "a", Seed: 2, Outcome: "scored", Score: &two},
		{Task: "t", Agent: "a", Seed: 3, Outcome: runs.OutcomeDisqualified},
	}, nil)
	r := rows[0]
	if r.Runs != 3 || r.Scored != 2 || r.Invalid != 0 || r.AgentFailed != 1 || r.Disqualified != 1 || r.Mean != 0.6 || !near(r.FloorMean, 0.4, 1e-12) {
		t.Fatalf("row %+v", r)
	}
	var b strings.Builder
	WriteTable(&b, rows)
	if !strings.Contains(b.String(), "2/1/0") || !strings.Contains(b.String(), "67% [21, 94]") {
		t.Fatalf("table:\n%s", b.String())
	}
}

// TestGapClosedInEveryFormat: with anchors, each row shows beside its raw
// mean the share of the anchor gap it closed, unclipped, and the
// benchmark-wide mean per agent; a near-zero gap is flagged.
func TestGapClosedInEveryFormat(t *testing.T) {
	s := func(x float64) *float64 { return &x }
	runs := []Entry{
		{Task: "t", Agent: "a", Seed: 1, Outcome: "scored", Score: s(0.6)},
		{Task: "t", Agent: "a", Seed: 2, Outcome: "scored", Score: s(0.7)},
		{Task: "u", Agent: "a", Seed: 1, Outcome: "scored", Score: s(0.3)},
		{Task: "v", Agent: "a", Seed: 1, Outcome: "scored", Score: s(0.5)},
	}
	setup := Setup{Anchors: map[string]Anchor{
		"t": {Baseline: 0.5, Top: 0.9, Source: "measured"}, // (0.65-0.5)/0.4 = 37.5 %
		"u": {Baseline: 0.5, Top: 0.9},                     // below the baseline: -50 %
		"v": {Baseline: 0.5, Top: 0.5001},                  // near-zero gap
	}}
	want := map[string][]string{
		"table": {"37.5 [", "-50.0", "(near-zero gap)", "gap closed %", "gap closed, mean over 3 tasks with anchors (failures at the baseline): a"},
		"md":    {"gap closed % [95 % CI]", "| 37.5 [", "| -50.0 |"},
		"csv":   {"gap_closed_pct,gap_closed_low,gap_closed_high,baseline,top", ",37.5000,", ",-50.0000,,,0.5000,0.9000,"},
		"json":  {`"gap_closed_pct": 37.4999`, `"gap_closed_pct": -50`, `"near_zero_gap": true`, `"agents"`},
	}
	for _, f := range Formats {
		var b strings.Builder
		if err := Write(&b, f, "b", Build(runs, setup)); err != nil {
			t.Fatal(err)
		}
		for _, w := range want[f] {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s lacks %q:\n%s", f, w, b.String())
			}
		}
	}
	// Terse (the starter's table): the anchors' sources one flag away,
	// and the table ends with each agent at a glance.
	for _, terse := range []bool{false, true} {
		setup.Terse = terse
		var b strings.Builder
		if err := Write(&b, "table", "b", Build(runs, setup)); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if strings.Contains(b.String(), "— measured") == terse || !strings.HasPrefix(lines[len(lines)-2], "agent ") {
			t.Errorf("terse %v:\n%s", terse, b.String())
		}
	}
	var b strings.Builder
	if err := Write(&b, "csv", "b", Build(runs, Setup{})); err != nil || strings.Contains(b.String(), "37.5") {
		t.Fatalf("without anchors no gap is shown: %v\n%s", err, b.String())
	}
}

// TestBoardShowsWhatChangedARow: a disqualified run's broken rules and a
// scored run's flags are on the board, named by run, in every format
// that prints notes; the row counts the flagged runs.
func TestBoardShowsWhatChangedARow(t *testing.T) {
	s := 0.55
	entries := []Entry{
		{RunID: "r1", Task: "edge_llm_compression", Agent: "a", Seed: 1, Outcome: runs.OutcomeDisqualified, Violations: []string{"unmodified microsoft/phi-2: every tensor has its name and shape"}},
		{RunID: "r2", Task: "edge_llm_compression", Agent: "a", Seed: 2, Outcome: runs.OutcomeScored, Score: &s, Flags: []string{"weights identical to a download"}},
	}
	for _, format := range []string{"table", "md"} {
		var b strings.Builder
		if err := Write(&b, format, "bench", Build(entries, Setup{})); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"disqualified: edge_llm_compression a seed 1 (run r1): unmodified microsoft/phi-2", "flagged: edge_llm_compression a seed 2 (run r2): weights identical to a download"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("%s board lacks %q:\n%s", format, want, b.String())
			}
		}
	}
	if rows := Summarise(entries, nil); rows[0].Flagged != 1 || rows[0].Disqualified != 1 {
		t.Fatalf("row: %+v", rows[0])
	}
}
