package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mlrb/mlrb/internal/testkit/testenv"
	"github.com/mlrb/mlrb/tasks"
)

// fakeLMEval writes one results file under --output_path, as lm-eval
// does (a directory named after the model, a dated name).
const fakeLMEval = `#!/bin/sh
while [ $# -gt 0 ]; do
  if [ "$1" = --output_path ]; then out=$2; fi
  shift
done
mkdir -p "$out/model"
printf '{"results": {"mmlu": {"acc,none": 0.5}}}' > "$out/model/results_2026-11-24T10-00-00.json"
`

// fakePeak measures what the test says, for the model it was named.
const fakePeak = `#!/bin/sh
printf '{"peak_memory_bytes": 123, "peak_context": %s, "dtype": "%s", "device": "%s"}' "$2" "$3" "$1" > "$4"
`

func runWrapper(t *testing.T, args ...string) map[string]any {
	t.Helper()
	testenv.Tool(t, "python3", "apt-get install python3")
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	_ = os.MkdirAll(bin, 0o755)
	for name, body := range map[string]string{"lm_eval": fakeLMEval, "mlrb-peak-memory": fakePeak} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "picked-by-the-worker.json")
	spec := filepath.Join(dir, "task.json")
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	compression, _ := cat.Get("edge_llm_compression")
	b, _ := json.Marshal(compression)
	if err := os.WriteFile(spec, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{filepath.Join("lmeval", "mlrb-eval-lmeval")}, append(args[:len(args):len(args)], out, "--model", "hf",
		"--model_args", "pretrained=/work/model,use_safetensors=True,trust_remote_code=False", "--tasks", "mmlu")...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "MLRB_TASK_SPEC="+spec)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mlrb-eval-lmeval: %v\n%s", err, b)
	}
	b, err = os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEvalWrapperMeasuresThePeak: with --peak-memory the wrapper has the
// model's peak memory measured (for the model lm-eval loads) over the
// task spec's context and in its dtype (edge_llm_compression: 2,000
// tokens, float32, as the kit) and puts it in the results it hands the
// worker; without, lm-eval's file goes as it is.
func TestEvalWrapperMeasuresThePeak(t *testing.T) {
	r := runWrapper(t, "--peak-memory")
	m, _ := r["mlrb_measured"].(map[string]any)
	if m["peak_memory_bytes"] != 123.0 || m["peak_context"] != 2000.0 || m["dtype"] != "float32" || m["device"] != "/work/model" || r["results"] == nil {
		t.Fatalf("results: %v", r)
	}
	if r := runWrapper(t); r["mlrb_measured"] != nil || r["results"] == nil {
		t.Fatalf("without --peak-memory: %v", r)
	}
}

// TestPeakMemoryNamesAModelThatCannotTakeTheContext: a GPT-2 of 1,024
// positions (MLRB's own baseline shape) is not run over 2,000 tokens (it
// crashed the evaluation, fidelity 1.6 #5): the measure says how many
// positions it takes, before torch is even imported.
func TestPeakMemoryNamesAModelThatCannotTakeTheContext(t *testing.T) {
	py := testenv.Tool(t, "python3", "apt-get install python3")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "gpt2", "n_positions": 1024, "n_ctx": 1024}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "measured.json")
	if b, err := exec.Command(py, filepath.Join("lmeval", "mlrb-peak-memory"), dir, "2000", "float32", out).CombinedOutput(); err != nil {
		t.Fatalf("mlrb-peak-memory: %v\n%s", err, b)
	}
	b, _ := os.ReadFile(out)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["max_positions"] != 1024.0 || m["positions_key"] != "n_positions" || m["peak_memory_bytes"] != nil {
		t.Fatalf("measured: %s (%v)", b, err)
	}
}
