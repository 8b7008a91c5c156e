package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mlrb/mlrb/internal/testkit/testenv"
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
printf '{"peak_memory_bytes": 123, "peak_context": %s, "device": "%s"}' "$2" "$1" > "$3"
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
	cmd := exec.Command("sh", append([]string{filepath.Join("lmeval", "mlrb-eval-lmeval")}, append(args[:len(args):len(args)], out, "--model", "hf",
		"--model_args", "pretrained=/work/model,use_safetensors=True,trust_remote_code=False", "--tasks", "mmlu")...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mlrb-eval-lmeval: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEvalWrapperMeasuresThePeak: with --peak-context the wrapper has the
// model's peak memory measured (for the model lm-eval loads) and puts it
// in the results it hands the worker; without, lm-eval's file goes as it is.
func TestEvalWrapperMeasuresThePeak(t *testing.T) {
	r := runWrapper(t, "--peak-context", "2048")
	m, _ := r["mlrb_measured"].(map[string]any)
	if m["peak_memory_bytes"] != 123.0 || m["peak_context"] != 2048.0 || m["device"] != "/work/model" || r["results"] == nil {
		t.Fatalf("results: %v", r)
	}
	if r := runWrapper(t); r["mlrb_measured"] != nil || r["results"] == nil {
		t.Fatalf("without --peak-context: %v", r)
	}
}
