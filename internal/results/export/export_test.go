package export

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
)

func sample() (*runs.Result, []transcript.Call) {
	s, b := 0.8, 0.7
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	r := &runs.Result{RunID: "b/ref/t/s1", Task: "t", Agent: "ref", Seed: 1, Outcome: runs.OutcomeScored, Score: &s, Attempts: 2,
		Metrics:       map[string]float64{"acc": 0.8, "constraints/params": 1e6},
		AttemptLog:    []runs.AttemptRecord{{N: 1, End: "lost", LeasedAt: at}, {N: 2, End: "exited", FromS: 10, ToS: 30}},
		CheckpointLog: []runs.CheckpointInfo{{Seq: 1, At: at, AgentS: 10, Bytes: 100}, {Seq: 2, AgentS: 30, Final: true}},
		Curve:         []runs.Mark{{AtS: 5, NoModel: "no checkpoint yet", Split: "dev"}, {AtS: 15, Seq: 1, AgentS: 10, Score: &b, Best: &b, Split: "dev", Tries: 1}},
		Cost:          runs.Cost{LLM: &llm.Ledger{Usage: llm.Usage{Calls: 1, USD: 0.5}}},
	}
	calls := []transcript.Call{{Seq: 1, Attempt: 2, Kind: transcript.KindLLM, Model: "gpt-4o", Status: 200, Start: at, Usage: llm.Usage{Tokens: llm.Tokens{Input: 10, Output: 5}, USD: 0.5}}}
	return r, calls
}

// TestParquetRoundTrip: the tables read back with parquet-go hold the
// rows written, a missing score as null, not 0.
func TestParquetRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, "parquet")
	if err != nil {
		t.Fatal(err)
	}
	r, calls := sample()
	if err := w.Result("b", r); err != nil {
		t.Fatal(err)
	}
	if err := w.Calls(r.RunID, calls); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rs, err := parquet.ReadFile[RunRow](filepath.Join(dir, "runs.parquet"))
	if err != nil || len(rs) != 1 || *rs[0].Score != 0.8 || rs[0].Attempts != 2 || rs[0].LLMUSD != 0.5 || rs[0].BenchmarkID != "b" {
		t.Fatalf("runs %+v, %v", rs, err)
	}
	ms, err := parquet.ReadFile[MarkRow](filepath.Join(dir, "marks.parquet"))
	if err != nil || len(ms) != 2 || ms[0].Score != nil || ms[0].NoModel == "" || *ms[1].Best != 0.7 {
		t.Fatalf("marks %+v, %v", ms, err)
	}
	cs, err := parquet.ReadFile[CallRow](filepath.Join(dir, "calls.parquet"))
	if err != nil || len(cs) != 1 || cs[0].Model != "gpt-4o" || cs[0].InputTokens != 10 || !cs[0].Start.Equal(calls[0].Start) {
		t.Fatalf("calls %+v, %v", cs, err)
	}
	as, _ := parquet.ReadFile[AttemptRow](filepath.Join(dir, "attempts.parquet"))
	ss, _ := parquet.ReadFile[ScoreRow](filepath.Join(dir, "scores.parquet"))
	cks, _ := parquet.ReadFile[CheckpointRow](filepath.Join(dir, "checkpoints.parquet"))
	if len(as) != 2 || len(ss) != 2 || ss[0].Metric != "acc" || len(cks) != 2 || !cks[1].Final {
		t.Fatalf("attempts %+v, scores %+v, checkpoints %+v", as, ss, cks)
	}
	if _, err := os.Stat(filepath.Join(dir, "schema.json")); err != nil {
		t.Fatal(err)
	}
}

// TestCSV: a header of the schema's columns, an empty cell for a
// missing score.
func TestCSV(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, "csv")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := sample()
	if err := w.Result("b", r); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "marks.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	if strings.Join(rows[0][:5], ",") != "run_id,task,agent,seed,mark_s" || rows[1][7] != "" || rows[2][7] != "0.7" {
		t.Fatalf("marks.csv %v", rows)
	}
}

// TestSchemaDocumented: every column of every table is in the results page's
// table of the export schema, with its type.
func TestSchemaDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "use", "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tab := range Schema() {
		for _, c := range tab.Columns {
			if c.Doc == "" || c.Type == "" {
				t.Errorf("%s.%s has no doc or type", tab.Name, c.Name)
			}
			if !strings.Contains(string(b), "| "+tab.Name+" | `"+c.Name+"` | "+c.Type+" |") {
				t.Errorf("docs/use/results.md documents no %s.%s (%s): run `go run ./starter export --schema`", tab.Name, c.Name, c.Type)
			}
		}
	}
}

// TestCSVNeverHoldsAFormula (audit F8): model names and hosts an agent
// chose that a spreadsheet would run as formulas are written behind a
// quote in CSV, as they are in Parquet.
func TestCSVNeverHoldsAFormula(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, "csv")
	if err != nil {
		t.Fatal(err)
	}
	evil := []string{`=HYPERLINK("http://evil.example","x")`, "@SUM(1+1)", "+1+1", "-2+3", "\tTAB", "\rCR"}
	var calls []transcript.Call
	for i, m := range evil {
		calls = append(calls, transcript.Call{Seq: i + 1, Attempt: 1, Kind: transcript.KindLLM, Model: m, Host: m + ":443"})
	}
	if err := w.Calls("r", calls); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "calls.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows[1:] {
		for _, c := range row {
			if c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
				t.Fatalf("a cell a spreadsheet runs: %q", c)
			}
		}
	}
}

// TestResearchTables: a run's experiments and GPU samples read back from
// Parquet, an experiment's model and its score beside it, a GPU that
// reports no power as null; the run's row has its research measures and
// GPU dollars.
func TestResearchTables(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, "parquet")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := sample()
	usd, busy, s := 12.5, 0.4, 0.7
	r.Cost.GPUUSD = &usd
	r.Research = &runs.Measures{Experiments: 1, PerHour: 2, GPUBusyShare: &busy}
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	obs := []*observe.Observation{{Attempt: 2, Start: at, StartAgentS: 10, GPU: []observe.GPUSample{{At: at.Add(time.Minute), Index: 3, Util: 80, MemMiB: 1000}}}}
	rs := observe.Research{Experiments: []observe.Experiment{{Attempt: 2, PID: 7, Command: "python train.py", Start: at, End: at.Add(time.Hour), Outcome: observe.Ended,
		Model: &observe.ModelRef{Checkpoint: 2, Path: "output/model", Score: &s, Split: "dev"}}}}
	if err := w.Result("b", r); err != nil {
		t.Fatal(err)
	}
	if err := w.Research(r, rs, obs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	es, err := parquet.ReadFile[ExperimentRow](filepath.Join(dir, "experiments.parquet"))
	if err != nil || len(es) != 1 || es[0].Command != "python train.py" || es[0].ModelSeq != 2 || *es[0].ModelScore != 0.7 || es[0].Outcome != "ended" {
		t.Fatalf("experiments %+v, %v", es, err)
	}
	gs, err := parquet.ReadFile[GPUSampleRow](filepath.Join(dir, "gpu_samples.parquet"))
	if err != nil || len(gs) != 1 || gs[0].Device != 3 || gs[0].Util != 80 || gs[0].PowerW != nil || gs[0].AgentS != 70 {
		t.Fatalf("gpu samples %+v, %v", gs, err)
	}
	runsRead, err := parquet.ReadFile[RunRow](filepath.Join(dir, "runs.parquet"))
	if err != nil || *runsRead[0].GPUUSD != 12.5 || runsRead[0].Experiments != 1 || *runsRead[0].GPUBusy != 0.4 || runsRead[0].FirstModelS != nil {
		t.Fatalf("runs %+v, %v", runsRead, err)
	}
}
