package export

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/tasks"
)

// TestEEEMatchesSchema: the records WriteEEE writes hold to Every Eval
// Ever's v0.2.1 record schema, for agents with and without a model, a
// task with a Hugging Face dataset and one with generated data, a row
// with an interval and one with a single run (none), and a row with no
// counted run left out.
func TestEEEMatchesSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile(filepath.Join("testdata", "eee-0.2.1.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]*tasks.Spec{}
	for _, id := range []string{"baby_lm", "mini_baby_lm"} {
		if specs[id], err = cat.Get(id); err != nil {
			t.Fatal(err)
		}
	}
	nan := math.NaN()
	rows := []leaderboard.Row{
		{Task: "baby_lm", Agent: "claude", Runs: 3, Scored: 2, AgentFailed: 1, Counted: 3, FloorMean: 0.6, FloorLow: 0.5, FloorHigh: 0.7, FloorStd: 0.05, Mean: 0.65, GapClosed: 40},
		{Task: "mini_baby_lm", Agent: "claude", Runs: 1, Scored: 1, Counted: 1, FloorMean: 0.8, FloorLow: nan, FloorHigh: nan, FloorStd: nan, Mean: 0.8, GapClosed: nan},
		{Task: "mini_baby_lm", Agent: "noop", Runs: 2, Invalid: 2, FloorMean: nan, Mean: nan},
	}
	rs := []runs.Result{{Agent: "claude", Task: "baby_lm", Hardware: "1× A100-40GB",
		AgentDef: &runs.AgentRef{Name: "claude", Hash: "sha256:ab", Image: "sha256:cd", Provider: "anthropic", Model: "claude-3-5-sonnet-20241022"}}}
	dir := t.TempDir()
	files, err := WriteEEE(dir, EEE{Benchmarks: []string{"b1", "b2"}, Rows: rows, Runs: rs, Specs: specs, Organization: "lab", Relationship: "third_party",
		Version: "test", Now: time.Unix(1_800_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("%d files, want one per agent", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(doc); err != nil {
			t.Fatalf("%s does not hold to the schema: %v\n%s", f, err, b)
		}
	}
	var claude struct {
		ModelInfo struct{ ID, Developer string } `json:"model_info"`
		Results   []struct {
			Name   string `json:"evaluation_name"`
			Source struct {
				Type string `json:"source_type"`
				Repo string `json:"hf_repo"`
			} `json:"source_data"`
			Score struct{ Score float64 } `json:"score_details"`
		} `json:"evaluation_results"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "claude.json"))
	if err := json.Unmarshal(b, &claude); err != nil {
		t.Fatal(err)
	}
	if claude.ModelInfo.ID != "anthropic/claude-3-5-sonnet-20241022" || len(claude.Results) != 2 || claude.Results[0].Score.Score != 0.6 ||
		claude.Results[0].Source.Type != "hf_dataset" || claude.Results[0].Source.Repo == "" || claude.Results[1].Source.Type != "other" {
		t.Fatalf("claude's record: %+v", claude)
	}
	// The schema is no formality: a relationship it does not know, or a
	// field it does not have, is refused.
	for _, bad := range []string{strings.Replace(string(b), `"third_party"`, `"operator"`, 1), strings.Replace(string(b), `"schema_version"`, `"schema"`, 1)} {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(doc) == nil {
			t.Fatal("the schema let a bad record through")
		}
	}
	b, _ = os.ReadFile(filepath.Join(dir, "noop.json"))
	if !strings.Contains(string(b), `"evaluation_results": []`) {
		t.Fatalf("a row with no counted run must be left out:\n%s", b)
	}
}
