package report

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
)

func results() []runs.Result {
	var rs []runs.Result
	for _, agent := range []string{"alpha", "beta"} {
		for _, task := range []string{"t1", "t2"} {
			for seed := int64(1); seed <= 3; seed++ {
				score := 0.5 + 0.1*float64(seed)
				if agent == "beta" {
					score -= 0.2
				}
				best := score - 0.1
				r := runs.Result{RunID: fmt.Sprintf("b/%s/%s/s%d", agent, task, seed), Benchmark: "b", Task: task, Agent: agent, Seed: seed,
					Outcome: runs.OutcomeScored, Score: &score, TimeLimitS: 30,
					Curve: []runs.Mark{{AtS: 3, Seq: 1, AgentS: 6, Best: &best, Score: &best, Split: contract.SplitDev}, {AtS: 15, Seq: 2, AgentS: 15, Best: &best, Score: &best, Split: contract.SplitDev}}}
				if agent == "beta" && seed == 3 {
					r.Outcome, r.Score, r.Reason = runs.OutcomeAgentFailed, nil, "agent exited 1"
				}
				rs = append(rs, r)
			}
		}
	}
	return rs
}

// TestReportPages: the index holds the agents' summary, the tasks ×
// agents table linking to the runs, the leaderboard, the runs table with
// its filters, the glossary, when and by which mlrb it was written and a
// partial banner; curves run to the budget, name their split and mark
// the final score; every page is written and well formed where it is
// XML.
func TestReportPages(t *testing.T) {
	dir := t.TempDir()
	in := Input{Title: "b", Results: results(), Setup: leaderboard.Setup{Anchors: map[string]leaderboard.Anchor{"t1": {Baseline: 0.2, Top: 0.9}}},
		Version: "v-test", Generated: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Partial: []string{"benchmark b is running: 10 of 12 runs done"}}
	if err := Write(context.Background(), dir, in); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	idx := string(b)
	for _, want := range []string{`id="agents"`, `id="pivot"`, `data-task="t1" data-agent="beta"`, `id="leaderboard"`, `id="runs"`, `id="f-agent"`, `id="glossary"`,
		"generated 2026-11-25 12:00 UTC by mlrb v-test", `id="partial"`, "10 of 12 runs done", "agent exited 1", "marks scored on the dev split", `class="final"`, "67% ["} {
		if !strings.Contains(idx, want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	// The agents' summary ranks alpha (every seed scored, higher) first.
	if strings.Index(idx, ">alpha<") > strings.Index(idx, ">beta<") {
		t.Error("beta ranks above alpha")
	}
	svg, err := os.ReadFile(filepath.Join(dir, "leaderboard.svg"))
	if err != nil || xml.Unmarshal(svg, new(struct{})) != nil {
		t.Fatalf("leaderboard.svg: %v", err)
	}
	for _, r := range in.Results {
		page, err := os.ReadFile(filepath.Join(dir, "runs", Key(r.RunID)+".html"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(page), "the model of a later checkpoint (6s)") {
			t.Fatalf("%s: a mark scored on a later checkpoint is not said so", r.RunID)
		}
	}
}

// TestHuman: durations read as people write them.
func TestHuman(t *testing.T) {
	for s, want := range map[float64]string{22.5: "22.5s", 3: "3s", 125: "2m5s", 120: "2m", 4 * 3600: "4h", 16*3600 + 1800: "16h30m", 0.25: "0.2s"} {
		if got := human(s); got != want {
			t.Errorf("human(%v) = %q, want %q", s, got, want)
		}
	}
}

// TestReportCallPages: a run's calls are written in pages of
// CallsPerPage as scripts beside its page (they open from disk), each
// call with its model and usage, and its bodies' start when the report
// keeps bodies; a secret the recorder redacted stays out.
func TestReportCallPages(t *testing.T) {
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	runID := "b/alpha/t1/s1"
	rec := &transcript.Recorder{Store: store, RunID: runID, Attempt: 1, Redact: []string{"sk-secret"}}
	for i := range CallsPerPage + 3 {
		req := []byte(fmt.Sprintf(`{"model":"gpt-4o","messages":[{"role":"user","content":"call %d with sk-secret"}]}`, i))
		rec.Add(transcript.Call{Kind: transcript.KindLLM, API: llm.ChatCompletions, Model: "gpt-4o", Status: 200, Start: time.Unix(1_800_000_000+int64(i), 0),
			Usage: llm.Usage{Calls: 1, Tokens: llm.Tokens{Input: 11, Output: 7}, USD: 0.25}}, req, []byte(`{"choices":[]}`))
	}
	rec.Wait()
	dir := t.TempDir()
	rs := results()[:1]
	if err := Write(context.Background(), dir, Input{Title: "b", Results: rs, Store: store, Bodies: 200}); err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob(filepath.Join(dir, "runs", Key(runID), "calls-*.js"))
	if len(pages) != 2 {
		t.Fatalf("call pages %v, want 2 of %d calls", pages, CallsPerPage+3)
	}
	b, err := os.ReadFile(pages[1])
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if !strings.HasPrefix(page, "mlrbCalls(2,") || strings.Count(page, `"m":"gpt-4o"`) != 3 || !strings.Contains(page, `"usd":0.25`) || !strings.Contains(page, "call 502 with") {
		t.Fatalf("the second page: %.400s", page)
	}
	if strings.Contains(page, "sk-secret") {
		t.Fatal("a redacted secret reached the report")
	}
}
