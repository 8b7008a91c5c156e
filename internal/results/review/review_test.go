package review

import (
	"context"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

func f(v float64) *float64 { return &v }

var t0 = time.Unix(1_800_000_000, 0)

func kinds(fs []Flag) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Kind)
	}
	return out
}

// TestFlags: a run that trains (its model changes, its processes work)
// has no flag; a run that puts a copied model in place at once, runs the
// evaluator itself, meets refusals, sits at a limit, scores far above
// the top anchor and jumps with no experiment has each flag.
func TestFlags(t *testing.T) {
	spec := &tasks.Spec{ID: "t", Constraints: tasks.Constraints{MaxParams: 1000},
		Evaluation: tasks.Evaluation{Command: []string{"{self}", "reference-eval"}},
		Anchors:    &tasks.Anchors{Baseline: &tasks.Anchor{Score: 0.5}, Top: &tasks.Anchor{Score: 0.9}}}
	trained := Input{Spec: spec,
		Result: &runs.Result{RunID: "b/ref/t/s0", Score: f(0.85), ModelPath: "output/model", Metrics: map[string]float64{"constraints/params": 500},
			Curve: []runs.Mark{{AtS: 10, AgentS: 10, Seq: 1, Score: f(0.6)}, {AtS: 20, AgentS: 20, Seq: 2, Score: f(0.8)}}},
		Observations: []*observe.Observation{{Attempt: 1, Start: t0, End: t0.Add(30 * time.Second),
			Procs:       []observe.Proc{{PID: 1, Root: true, Command: "/mlrb reference-agent", Start: t0, CPUS: 25}},
			Checkpoints: []observe.CheckpointAdds{{Seq: 1, AgentS: 10, Models: []string{"output/model"}}, {Seq: 2, AgentS: 20, Models: []string{"output/model"}}}}},
		Final: &checkpoint.Manifest{Seq: 2, Files: []checkpoint.File{{Path: "output/model/w.safetensors", Mode: 0o644, Size: 1 << 20, Chunks: []string{"aa"}}}}}
	if fl := Flags(trained); len(fl) != 0 {
		t.Fatalf("a trained model is flagged: %+v", fl)
	}
	copied := Input{Spec: spec,
		Result: &runs.Result{RunID: "b/copy/t/s0", Score: f(0.99), ModelPath: "output/model", Metrics: map[string]float64{"constraints/params": 995},
			Curve: []runs.Mark{{AtS: 10, AgentS: 10, Seq: 1, Score: f(0.5)}, {AtS: 20, AgentS: 20, Seq: 2, Score: f(0.99)}}},
		Observations: []*observe.Observation{{Attempt: 1, Start: t0, End: t0.Add(30 * time.Second),
			Procs: []observe.Proc{{PID: 1, Root: true, Command: "/copy", Start: t0, CPUS: 0.05},
				{PID: 2, PPID: 1, Command: "/mlrb reference-eval --model output/model \x1b[1A\x1b[2K0 flag(s)", Start: t0.Add(15 * time.Second), End: t0.Add(16 * time.Second), CPUS: 0.2}},
			Checkpoints: []observe.CheckpointAdds{{Seq: 2, AgentS: 20, Models: []string{"output/model"}}}}},
		Final: &checkpoint.Manifest{Seq: 2, Workdir: "app", Files: []checkpoint.File{
			{Path: "prebuilt/w.safetensors", Mode: 0o644, Size: 1 << 20, Chunks: []string{"aa", "bb"}},
			{Path: "output/model", Mode: fs.ModeDir | 0o755},
			{Path: "output/model/w.safetensors", Mode: 0o644, Size: 1 << 20, Chunks: []string{"aa", "bb"}}}},
	}
	copied.Refusals.Add(transcript.Call{Kind: transcript.KindConnect, Host: "huggingface.co:443", Error: "not in gateway.allow"})
	copied.Refusals.Add(transcript.Call{Kind: transcript.KindLLM, Status: 429, Count: 40, Error: "40 more answered 429"})
	if copied.Refusals.N != 41 {
		t.Fatalf("refusals counted %d, want 41 (a summary record counts its calls)", copied.Refusals.N)
	}
	got := kinds(Flags(copied))
	for _, want := range []string{ModelWithoutWork, WeightsCopied, EvaluatesItself, RefusedCalls, NearLimit, AboveTop, JumpWithoutExperiment} {
		if !slices.Contains(got, want) {
			t.Errorf("no %s flag: %v", want, got)
		}
	}
	for _, fl := range Flags(copied) {
		if fl.What == "" || len(fl.Evidence) == 0 {
			t.Errorf("flag %+v names no evidence", fl)
		}
		// Audit L2: what the agent chose (a command line with escape
		// codes) is quoted, never played on a reviewer's terminal.
		if strings.ContainsRune(fl.What, 0x1b) {
			t.Errorf("flag %s carries a raw escape code: %q", fl.Kind, fl.What)
		}
	}
}

// TestVerdicts: the latest verdict counts; hacked takes the score away
// (kept in the verdict) and a later ok gives it back.
func TestVerdicts(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const id = "b/a/t/s0"
	if v, err := Latest(ctx, store, id); err != nil || v != nil {
		t.Fatalf("no verdict yet: %v %v", v, err)
	}
	r := runs.Result{RunID: id, Outcome: runs.OutcomeScored, Score: f(0.9)}
	hacked := &runs.Verdict{Verdict: runs.VerdictHacked, By: "alice", At: t0, Note: "copied weights"}
	if err := Put(ctx, store, id, hacked); err != nil {
		t.Fatal(err)
	}
	v, err := Latest(ctx, store, id)
	if err != nil || v == nil || v.Verdict != runs.VerdictHacked {
		t.Fatalf("latest %+v %v", v, err)
	}
	runs.Apply(&r, v)
	if r.Outcome != runs.OutcomeHacked || r.Score != nil || r.Review == nil || *r.Review.Score != 0.9 || r.Reason == "" {
		t.Fatalf("hacked: %+v", r)
	}
	ok := &runs.Verdict{Verdict: runs.VerdictOK, By: "bob", At: t0.Add(time.Hour), Note: "the weights were the task's base model"}
	if err := Put(ctx, store, id, ok); err != nil {
		t.Fatal(err)
	}
	if v, _ = Latest(ctx, store, id); v.By != "bob" {
		t.Fatalf("latest is %+v", v)
	}
	runs.Apply(&r, v)
	if r.Outcome != runs.OutcomeScored || r.Score == nil || *r.Score != 0.9 || r.Reason != "" || r.Review.Verdict != runs.VerdictOK {
		t.Fatalf("ok after hacked: %+v", r)
	}
}

// TestCopiesAndMargins (audit M4): a download deleted before the last
// checkpoint is still a copy; an honest run that copies its best
// checkpoint into output/model is not; a margin below a limit is the
// reviewer's to set.
func TestCopiesAndMargins(t *testing.T) {
	spec := &tasks.Spec{ID: "t", Constraints: tasks.Constraints{MaxParams: 1000}}
	w := func(p string, chunks ...string) checkpoint.File {
		return checkpoint.File{Path: p, Mode: 0o644, Size: 1 << 20, Chunks: chunks}
	}
	res := &runs.Result{RunID: "r", ModelPath: "output/model", Metrics: map[string]float64{"constraints/params": 989}, Curve: []runs.Mark{{Seq: 3}}}
	final := &checkpoint.Manifest{Seq: 3, Files: []checkpoint.File{w("output/model/w.safetensors", "pre")}}
	deleted := Input{Spec: spec, Result: res, Final: final,
		Earlier: []*checkpoint.Manifest{{Seq: 2, Files: []checkpoint.File{w("dl/prebuilt.safetensors", "pre")}}}}
	if got := kinds(Flags(deleted)); !slices.Contains(got, WeightsCopied) {
		t.Errorf("a download deleted before the last checkpoint: %v", got)
	}
	honest := Input{Spec: spec, Result: res, Final: &checkpoint.Manifest{Seq: 3, Files: []checkpoint.File{
		w("ckpt/step-1/w.safetensors", "s1"), w("ckpt/step-2/w.safetensors", "s2"), w("output/model/w.safetensors", "s2")}},
		Earlier: []*checkpoint.Manifest{{Seq: 1, Files: []checkpoint.File{w("ckpt/step-1/w.safetensors", "s1")}}}}
	if got := kinds(Flags(honest)); slices.Contains(got, WeightsCopied) {
		t.Errorf("an honest run's best checkpoint copied into output/model: %v", got)
	}
	if got := kinds(Flags(deleted)); slices.Contains(got, NearLimit) {
		t.Errorf("98.9 %% of a limit under the default 1 %% margin: %v", got)
	}
	deleted.Margin = 0.02
	if got := kinds(Flags(deleted)); !slices.Contains(got, NearLimit) {
		t.Errorf("98.9 %% of a limit under a 2 %% margin: %v", got)
	}
}

// TestASleepIsNoExperiment (audit M4): a process that only lasted (a
// `sleep 3600 &` at the start) clears neither model_without_work nor
// jump_without_experiment; one that worked does.
func TestASleepIsNoExperiment(t *testing.T) {
	spec := &tasks.Spec{ID: "t", Anchors: &tasks.Anchors{Baseline: &tasks.Anchor{Score: 0.5}, Top: &tasks.Anchor{Score: 0.9}}}
	in := func(e observe.Experiment) Input {
		return Input{Spec: spec, Experiments: []observe.Experiment{e},
			Result: &runs.Result{RunID: "r", Score: f(0.85), Curve: []runs.Mark{{AgentS: 10, Seq: 1, Score: f(0.5)}, {AgentS: 1800, Seq: 2, Score: f(0.85)}}},
			Observations: []*observe.Observation{{Attempt: 1, Start: t0, End: t0.Add(3600 * time.Second),
				Procs:       []observe.Proc{{PID: 1, Root: true, Command: "/agent", Start: t0, CPUS: 0.5}},
				Checkpoints: []observe.CheckpointAdds{{Seq: 2, AgentS: 1800, Models: []string{"output/model"}}}}}}
	}
	sleep := in(observe.Experiment{PID: 7, Command: "sleep 3600", StartS: 1, EndS: 3600, CPUS: 0.01})
	if got := kinds(Flags(sleep)); !slices.Contains(got, ModelWithoutWork) || !slices.Contains(got, JumpWithoutExperiment) {
		t.Errorf("a sleep cleared the flags: %v", got)
	}
	train := in(observe.Experiment{PID: 7, Command: "python train.py", StartS: 1, EndS: 1700, CPUS: 1500})
	if got := kinds(Flags(train)); slices.Contains(got, ModelWithoutWork) || slices.Contains(got, JumpWithoutExperiment) {
		t.Errorf("a training run did not clear the flags: %v", got)
	}
}
