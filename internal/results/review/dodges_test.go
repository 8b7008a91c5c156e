package review

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

// cheater is the audit's M4 run: an hour, a prebuilt model put in place
// at 30 min, processes as procs (agent time = seconds from t0).
func cheater(gpus int, procs ...observe.Proc) Input {
	spec := &tasks.Spec{ID: "t", Resources: tasks.Resources{GPUCount: gpus},
		Evaluation: tasks.Evaluation{Command: []string{"{self}", "reference-eval"}},
		Anchors:    &tasks.Anchors{Baseline: &tasks.Anchor{Score: 0.5}, Top: &tasks.Anchor{Score: 0.9}}}
	root := observe.Proc{PID: 1, Root: true, Command: "/agent", Start: t0, CPUS: 0.5}
	obs := &observe.Observation{Attempt: 1, Start: t0, End: t0.Add(time.Hour), Procs: append([]observe.Proc{root}, procs...),
		Checkpoints: []observe.CheckpointAdds{{Seq: 2, AgentS: 1800, Models: []string{"output/model"}}}}
	in := Input{Spec: spec, Observations: []*observe.Observation{obs},
		Result: &runs.Result{RunID: "r", Score: f(0.85), ModelPath: "output/model", Curve: []runs.Mark{{AgentS: 10, Seq: 1, Score: f(0.5)}, {AgentS: 1800, Seq: 2, Score: f(0.85)}}},
		Final: &checkpoint.Manifest{Seq: 2, Files: []checkpoint.File{
			{Path: "e.py", Mode: 0o644, Size: 40, Chunks: []string{"script"}},
			{Path: "output/model/w.safetensors", Mode: 0o644, Size: 8 << 20, Chunks: []string{"pre"}}}},
		ReadFile: func(_ *checkpoint.Manifest, p string, _ int64) ([]byte, error) {
			if p == "e.py" {
				return []byte("import lm_eval\nlm_eval.simple_evaluate()\n"), nil
			}
			return nil, fmt.Errorf("%s: not in checkpoint", p)
		}}
	in.Experiments = experiments(in)
	return in
}

// experiments are the procs other than the root, as the run's research
// derives them (agent time = seconds since t0).
func experiments(in Input) []observe.Experiment {
	var out []observe.Experiment
	for _, p := range in.Observations[0].Procs[1:] {
		end := p.End
		if end.IsZero() {
			end = in.Observations[0].End
		}
		out = append(out, observe.Experiment{Attempt: 1, PID: p.PID, Command: p.Command, Start: p.Start, End: end,
			StartS: p.Start.Sub(t0).Seconds(), EndS: end.Sub(t0).Seconds(), CPUS: p.CPUS, GPUMiB: p.GPUMiB})
	}
	return out
}

func proc(pid, ppid int, command string, from, to time.Duration, cpu, gpu float64) observe.Proc {
	return observe.Proc{PID: pid, PPID: ppid, Command: command, Start: t0.Add(from), End: t0.Add(to), CPUS: cpu, GPUMiB: gpu}
}

func has(t *testing.T, in Input, want bool, kinds_ ...string) {
	t.Helper()
	got := kinds(Flags(in))
	for _, k := range kinds_ {
		if slices.Contains(got, k) != want {
			t.Errorf("%s flagged %v, want %v: %v", k, !want, want, got)
		}
	}
}

// TestDodgesStillFlagged (audit M4): each cheap dodge the audit found is
// a test that the flag still fires, and the honest runs beside them stay
// clear.
func TestDodgesStillFlagged(t *testing.T) {
	t.Run("its own lm_eval lasting two minutes is no experiment", func(t *testing.T) {
		in := cheater(0, proc(5, 1, "python -m lm_eval --model hf --tasks hellaswag", 60*time.Second, 180*time.Second, 110, 0))
		has(t, in, true, ModelWithoutWork, JumpWithoutExperiment, EvaluatesItself)
	})
	t.Run("a wrapper script around lm_eval and its children are no work", func(t *testing.T) {
		in := cheater(0, proc(5, 1, "bash -c ./e.sh", 60*time.Second, 200*time.Second, 0.1, 0),
			proc(6, 5, "python3 e.py", 61*time.Second, 200*time.Second, 130, 0))
		has(t, in, true, ModelWithoutWork, JumpWithoutExperiment, EvaluatesItself)
	})
	t.Run("a CPU burn on a task that trains on GPUs is no training", func(t *testing.T) {
		in := cheater(1, proc(5, 1, "python3 -c while True: pass", 10*time.Second, 60*time.Second, 100, 0))
		has(t, in, true, ModelWithoutWork, JumpWithoutExperiment)
	})
	t.Run("training on the GPU clears them", func(t *testing.T) {
		in := cheater(1, proc(5, 1, "python3 train.py", 10*time.Second, 1700*time.Second, 1600, 30000))
		has(t, in, false, ModelWithoutWork, JumpWithoutExperiment, WeightsDownloaded, EvaluatesItself)
	})
	t.Run("weights the image brought", func(t *testing.T) {
		in := cheater(1, proc(5, 1, "python3 train.py", 10*time.Second, 1700*time.Second, 1600, 30000))
		in.Result.ImageCopies = []runs.ImageCopy{{File: "w.safetensors", Image: "/opt/prebuilt/w.safetensors", Size: 8 << 20}}
		has(t, in, true, WeightsCopied)
	})
	t.Run("weights the worker could not compare with the image", func(t *testing.T) {
		in := cheater(1, proc(5, 1, "python3 train.py", 10*time.Second, 1700*time.Second, 1600, 30000))
		in.Result.ImageNotCompared = "the agent's image img: context deadline exceeded"
		has(t, in, true, WeightsNotCompared)
	})
	t.Run("a download deleted before any checkpoint saw it", func(t *testing.T) {
		in := cheater(0, proc(5, 1, "python3 -c burn()", 10*time.Second, 60*time.Second, 100, 0))
		in.Downloads.Add(transcript.Call{Kind: transcript.KindConnect, Attempt: 1, Host: "files.example:443", Start: t0.Add(1500 * time.Second), LatencyMS: 60_000, Received: 6 << 20})
		has(t, in, true, WeightsDownloaded)
	})
	t.Run("a base model downloaded and trained on is not a download", func(t *testing.T) {
		in := cheater(0, proc(5, 1, "python3 train.py", 200*time.Second, 1700*time.Second, 1500, 0))
		in.Downloads.Add(transcript.Call{Kind: transcript.KindConnect, Attempt: 1, Host: "huggingface.co:443", Start: t0.Add(20 * time.Second), LatencyMS: 60_000, Received: 9 << 20})
		has(t, in, false, WeightsDownloaded, ModelWithoutWork)
	})
	t.Run("the evaluator run from a script that imports it", func(t *testing.T) {
		in := cheater(0, proc(5, 1, "python3 e.py --model output/model", 1900*time.Second, 1950*time.Second, 40, 0))
		has(t, in, true, EvaluatesItself)
	})
}

// TestScriptsReadOnce: every flag that asks whether a command scores
// shares one reading of the checkpoints' scripts.
func TestScriptsReadOnce(t *testing.T) {
	in := cheater(0, proc(5, 1, "python3 e.py", 60*time.Second, 180*time.Second, 110, 0))
	read := in.ReadFile
	reads := 0
	in.ReadFile = func(m *checkpoint.Manifest, p string, limit int64) ([]byte, error) {
		reads++
		return read(m, p, limit)
	}
	has(t, in, true, EvaluatesItself)
	if reads != 1 {
		t.Fatalf("e.py read %d times for one review", reads)
	}
}
