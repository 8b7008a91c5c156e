package tasks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEmbeddedCatalog(t *testing.T) {
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	full := []string{"baby_lm", "edge_llm_compression", "edge_llm_training", "llm_efficiency", "llm_merging", "math_reasoning", "mini_pile"}
	if got := c.IDs("full"); strings.Join(got, ",") != strings.Join(full, ",") {
		t.Fatalf("full suite = %v, want %v", got, full)
	}
	mini := c.IDs("mini")
	if len(mini) != 7 {
		t.Fatalf("mini suite = %v, want 7 tasks", mini)
	}
	hashes := map[string]string{}
	for _, id := range mini {
		s, err := c.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(s.Mirrors); err != nil {
			t.Errorf("%s mirrors %q: %v", id, s.Mirrors, err)
		}
		if prev, dup := hashes[s.Hash()]; dup {
			t.Errorf("%s and %s share a hash", id, prev)
		}
		hashes[s.Hash()] = id
	}
	s, _ := c.Get("mini_pile")
	if len(s.Metric.Parts) != 8 || s.Metric.Aggregate != "mean" {
		t.Errorf("mini_pile metric = %+v, want the mean of 8 SuperGLUE parts", s.Metric)
	}
	p, err := s.RenderPrompt()
	if err != nil || !strings.Contains(p, "record") {
		t.Errorf("prompt = %q, %v", p, err)
	}
}

func TestParseRejects(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("catalog", "mini_baby_lm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		text, want string
	}{
		"unknown field":   {string(good) + "colour: blue\n", "field colour not found"},
		"missing field":   {strings.Replace(string(good), "goal: ", "#goal: ", 1), `missing required field "goal"`},
		"bad duration":    {strings.Replace(string(good), "time_limit: 30s", "time_limit: soon", 1), `"soon" is not a duration`},
		"bad yaml":        {"id: [", "malformed"},
		"empty":           {"", "file is empty"},
		"bad aggregate":   {strings.Replace(string(good), "aggregate: mean", "aggregate: median", 1), "must be single or mean"},
		"bad prompt":      {strings.Replace(string(good), "{{.Goal}}", "{{.Nope}}", 1), "prompt"},
		"bad suite":       {strings.Replace(string(good), "suite: mini", "suite: huge", 1), "must be full or mini"},
		"missing ref":     {strings.Split(string(good), "reference:")[0] + "prompt: x\n", "missing required field \"reference\""},
		"bad start value": {strings.Replace(string(good), "start: scratch", "start: magic", 1), "reference.start"},
		"dev_args without the dev split's results": {strings.Replace(string(good), `dev_args: [--dev_results_file, "{dev_results}"]`, "dev_args: [--dev]", 1), "{dev_results}"},
		"dev_args without a curve command":         {strings.Replace(string(good), "    command: [\"{self}\", reference-eval", "    #", 1), "needs evaluation.curve.command"},
		"dev_args, no {results}":                   {strings.Replace(string(good), `--results_file, "{results}"]`, `--output_path, "{output}"]`, 1), "to name its results file as {results}"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestUserDirOverridesAndChecksName(t *testing.T) {
	dir := t.TempDir()
	good, _ := os.ReadFile(filepath.Join("catalog", "mini_baby_lm.yaml"))
	custom := strings.Replace(string(good), "id: mini_baby_lm", "id: my_task", 1)
	if err := os.WriteFile(filepath.Join(dir, "my_task.yaml"), []byte(custom), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get("my_task"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wrong.yaml"), []byte(custom), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "must match the file name") {
		t.Fatalf("want a file-name mismatch error, got %v", err)
	}
	if _, err := c.Get("nope"); err == nil || !strings.Contains(err.Error(), `unknown task "nope"`) {
		t.Fatalf("got %v", err)
	}
}

// Every real task names the evaluator image that has its evaluation
// command: the reference image has neither lm_eval nor Lean.
func TestRealTasksNameAnEvaluatorImage(t *testing.T) {
	cat, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	ids := cat.IDs("full")
	if len(ids) != 7 {
		t.Fatalf("full suite = %v", ids)
	}
	for _, id := range ids {
		if s, _ := cat.Get(id); s.Evaluation.Image == "" {
			t.Errorf("%s: evaluation.image is empty", id)
		}
	}
}

// TestMiniSuiteShipsMeasuredAnchors: every mini task carries a baseline
// and a top measured here (starter anchors measure), with the run and
// the evaluator that scored each, the top above the baseline.
func TestMiniSuiteShipsMeasuredAnchors(t *testing.T) {
	cat, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range cat.IDs("mini") {
		s, _ := cat.Get(id)
		a := s.Anchors
		if a == nil || a.Baseline == nil || a.Top == nil || a.Baseline.RunID == "" || a.Top.Evaluator == "" || a.Top.Score <= a.Baseline.Score {
			t.Errorf("%s: anchors %+v", id, a)
		}
	}
}

// TestCheckpointIntervalOfATask: a mini task names its checkpoint
// interval (seconds: its curve's marks are seconds apart); a run takes
// the shorter of it and its policy's, and the hash ignores it, as it
// ignores the marks. A negative one is refused.
func TestCheckpointIntervalOfATask(t *testing.T) {
	cat, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	mini, _ := cat.Get("mini_baby_lm")
	if got := mini.Interval(10*time.Minute, 0); got != 3*time.Second {
		t.Fatalf("mini_baby_lm under a 10m policy checkpoints every %s", got)
	}
	if got := mini.Interval(time.Second, 0); got != time.Second {
		t.Fatalf("a shorter policy: %s", got)
	}
	if got := mini.Interval(10*time.Minute, 44*time.Second); got != 44*time.Second {
		t.Fatalf("a 24 h mini run (its history allows 44 s at least): %s", got)
	}
	if sp := mini.CurveSpacing(mini.TimeLimit.D()); sp <= 0 || sp < mini.Interval(10*time.Minute, 0) {
		t.Fatalf("mini_baby_lm's marks are %s apart, its checkpoints %s", sp, mini.Interval(10*time.Minute, 0))
	}
	full, _ := cat.Get("baby_lm")
	if got := full.Interval(10*time.Minute, 0); got != 10*time.Minute {
		t.Fatalf("baby_lm: %s", got)
	}
	c := *mini
	c.CheckpointInterval = Duration(time.Minute)
	if c.Hash() != mini.Hash() {
		t.Fatal("the checkpoint interval changed the spec's hash")
	}
	raw, _ := os.ReadFile(filepath.Join("catalog", "mini_baby_lm.yaml"))
	if _, err := Parse([]byte(strings.Replace(string(raw), "checkpoint_interval: 3s", "checkpoint_interval: -3s", 1))); err == nil || !strings.Contains(err.Error(), "checkpoint_interval") {
		t.Fatalf("a negative interval: %v", err)
	}
}

// TestDevArgsBesideACheck: a task derived from a mini task that adds a
// check keeps its dev_args and parses (its evaluations run the two
// splits apart).
func TestDevArgsBesideACheck(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("catalog", "mini_baby_lm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(good), "  timeout: 2m\n", "  timeout: 2m\n  check: {command: [x, \"{item}\"], timeout: 1m, task: t, field: f}\n", 1)
	s, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if s.Evaluation.Check == nil || len(s.Evaluation.Curve.DevArgs) == 0 {
		t.Fatalf("evaluation %+v", s.Evaluation)
	}
}

// What a score is measured against (the anchors), when the research is
// sampled (marks, interval) and a rescore's tolerance leave a spec's
// hash alone; how a model is scored does not.
func TestHashCoversOnlyHowAModelIsScored(t *testing.T) {
	cat, err := Load("catalog")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := cat.Get("mini_baby_lm")
	if err != nil {
		t.Fatal(err)
	}
	c := *spec
	c.Anchors, c.Evaluation.Tolerance = nil, 0.5
	if c.Hash() != spec.Hash() {
		t.Fatal("the anchors or the tolerance changed the hash")
	}
	c.Evaluation.Timeout = Duration(c.Evaluation.Timeout.D() + 1)
	if c.Hash() == spec.Hash() {
		t.Fatal("the evaluation timeout did not change the hash")
	}
}

// TestEveryRealTaskIsReady: each of the seven tasks states its metric's
// items and a tolerance of at least one item of its smallest part (a CB
// item moves the SuperGLUE mean by 1/56/8 = 0.00223, over 0.002), ships
// a control its evaluator can score offline, and briefs the agent on
// every check, its rules and its data.
func TestEveryRealTaskIsReady(t *testing.T) {
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range c.IDs("full") {
		s, _ := c.Get(id)
		for _, p := range s.Metric.Parts {
			if p.Items <= 0 {
				t.Errorf("%s: metric part %s states no items", id, p.Task)
			}
		}
		if g := s.Granularity(); s.Evaluation.Tolerance < g {
			t.Errorf("%s: tolerance %v under one item of its smallest part (%v)", id, s.Evaluation.Tolerance, g)
		}
		if s.Evaluation.Control == nil {
			t.Errorf("%s ships no control: the first evaluator failure would wait for an operator", id)
		}
		brief, err := s.RenderPrompt()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range append(append([]string{}, s.Constraints.Rules...), "safetensors", "PEFT adapter", "auto_map") {
			if !strings.Contains(brief, want) {
				t.Errorf("%s: the brief leaves out %q", id, want)
			}
		}
		for _, d := range s.Datasets {
			if !strings.Contains(brief, d.URI) {
				t.Errorf("%s: the brief leaves out its data %s", id, d.URI)
			}
		}
	}
	mp, _ := c.Get("mini_pile")
	if g := mp.Granularity(); g < 0.00223 || g > 0.00224 {
		t.Fatalf("mini_pile's granularity %v, want one CB item of the mean: 0.00223", g)
	}
}

// TestEvaluationInputsAreChecked: a data set must be named in the
// command, hashed and sourced; a command cannot name an undeclared one;
// a control names a revision; a tolerance below one item is refused.
func TestEvaluationInputsAreChecked(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("catalog", "math_reasoning.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(good); err != nil {
		t.Fatal(err)
	}
	sum := "sha256:4eae0ba4a6503d6828afb63b4936f9913cce299ef81a17c372e1b75b56187177"
	for name, tc := range map[string]struct{ from, to, want string }{
		"unused data":       {`, --data, "{data:proofnet/test.jsonl}"]`, "]", "never named in evaluation.command"},
		"undeclared data":   {"{data:proofnet/test.jsonl}", "{data:other.jsonl}", "which evaluation.data does not declare"},
		"bad hash":          {sum, "sha256:abc", "evaluation.data[0].sha256"},
		"a path out":        {"- name: proofnet/test.jsonl", "- name: ../etc/passwd", "evaluation.data[0].name"},
		"moving revision":   {"revision: 0fc9ddf78a1e988dac52e2dac162b0ede4fd74ab", "revision: main", "evaluation.control.revision"},
		"relative control":  {"path: /opt/mlrb/controls/flan-t5-small", "path: controls/flan-t5-small", "evaluation.control.path"},
		"tolerance too low": {"tolerance: 0.01", "tolerance: 0.002", "less than one item"},
	} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(string(good), tc.from) {
				t.Fatalf("the catalog no longer holds %q", tc.from)
			}
			_, err := Parse([]byte(strings.Replace(string(good), tc.from, tc.to, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// The data's hash is in the spec's; the control is not (it scores nothing).
	a, _ := Parse(good)
	b, _ := Parse([]byte(strings.Replace(string(good), "4eae0ba4", "5eae0ba4", 1)))
	ctl, _ := Parse([]byte(strings.Replace(string(good), "0fc9ddf78a1e988dac52e2dac162b0ede4fd74ab", "1fc9ddf78a1e988dac52e2dac162b0ede4fd74ab", 1)))
	if a.Hash() == b.Hash() || a.Hash() != ctl.Hash() {
		t.Fatalf("hashes: %s, with other data %s, with another control %s", a.Hash(), b.Hash(), ctl.Hash())
	}
}

// TestFidelityFindings: each WRONG and ABSENT finding of the reading at
// b76b22e (shared/reviews/fidelity-b76b22e.md) that the catalog holds,
// by its number, as the catalog now answers it.
func TestFidelityFindings(t *testing.T) {
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	get := func(id string) (*Spec, string) {
		s, err := c.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.RenderPrompt()
		if err != nil {
			t.Fatal(err)
		}
		return s, p
	}
	briefs := map[string][]string{
		"llm_efficiency":       {"open-source data only"},                                                                             // 1.1 #3
		"mini_pile":            {"no pre-trained weights"},                                                                            // 1.3 #3
		"llm_merging":          {"LlamaAvg", "or be disqualified", "2024-05-31", "no training on MMLU", "open-source data only"},      // 1.4 #2
		"math_reasoning":       {"AlgorithmicResearchGroup/math_reasoning_autoformalization_track", "not on ProofNet"},                // 1.7 #3
		"edge_llm_compression": {"loaded in float32", "2000 tokens", "microsoft/phi-2 itself", "every tensor is named as one of its"}, // 1.5 #4, #6, #7
		"edge_llm_training":    {"loaded in float32", "takes a 2000-token input"},                                                     // 1.6 #4, #5
		"baby_lm":              {"PEFT adapter", "auto_map", "float16, bfloat16, float32"},                                            // C2
	}
	for id, wants := range briefs {
		_, p := get(id)
		for _, w := range wants {
			if !strings.Contains(p, w) {
				t.Errorf("%s's brief lacks %q", id, w)
			}
		}
	}
	for _, id := range []string{"llm_efficiency", "baby_lm"} { // 1.1 #8, 1.2 #6
		if s, _ := get(id); s.Resources.MemoryGB != 128 || s.Resources.DiskGB != 500 {
			t.Errorf("%s's resources %+v, MLRB states 128 GB and 500 GB", id, s.Resources)
		}
	}
	for _, id := range []string{"edge_llm_compression", "edge_llm_training"} { // 1.5 #6, 1.6 #4
		if s, _ := get(id); s.Constraints.PeakDtype != "float32" || s.Constraints.PeakContextOf() != 2000 {
			t.Errorf("%s's memory rule: %s over %d tokens, the kit's is float32 over 2000", id, s.Constraints.PeakDtype, s.Constraints.PeakContextOf())
		}
	}
	if s, _ := get("edge_llm_compression"); s.Constraints.Lineage == nil || s.Constraints.Lineage.Mode != LineageSubset { // 1.5 #4
		t.Error("edge_llm_compression checks no lineage from phi-2")
	}
	if s, _ := get("llm_merging"); s.Constraints.Lineage == nil || s.Constraints.Lineage.Mode != LineageArchitecture { // 1.4 #2
		t.Error("llm_merging checks no lineage from its experts")
	}
	for _, id := range []string{"mini_pile", "edge_llm_training"} { // 1.3 #9, 1.6 #12
		if s, _ := get(id); s.Evaluation.Tolerance < 1.0/56/8 {
			t.Errorf("%s's tolerance %v is under one CB item", id, s.Evaluation.Tolerance)
		}
	}
	if s, _ := get("math_reasoning"); len(s.Evaluation.Data) != 1 || !strings.Contains(strings.Join(s.Evaluation.Command, " "), "{data:proofnet/test.jsonl}") { // 1.7 #5
		t.Errorf("math_reasoning's held-out set is not its evaluation data: %+v", s.Evaluation)
	}
	for _, id := range c.IDs("full") { // 1.1 #12 … 1.7 #13: a control for every task
		if s, _ := get(id); s.Evaluation.Control == nil {
			t.Errorf("%s ships no control", id)
		}
	}
}
