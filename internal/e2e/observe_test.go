package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/observe"
	"github.com/mlrb/mlrb/internal/testenv"
)

// standInSMI is an nvidia-smi for the worker's host: device lines as the
// real one prints them for --query-gpu with --format=csv,noheader,nounits
// (nvidia-smi --help-query-gpu: index, utilization.gpu in %, memory.used
// in MiB, power.draw in W), and, for --query-compute-apps, the host pid of
// every process whose command line names a GPU experiment, holding
// 2048 MiB, as the driver reports the processes of a leased device.
const standInSMI = `#!/bin/sh
case "$1" in
--query-gpu=*) echo "0, 73, 20480, 251.30" ;;
--query-compute-apps=*)
  for d in /proc/[0-9]*; do
    case "$(tr '\0' ' ' < $d/cmdline 2>/dev/null)" in
    *"experiment finish"*|*"experiment long"*) echo "${d#/proc/}, 2048" ;;
    esac
  done ;;
*) echo "unknown query $1" >&2; exit 2 ;;
esac
`

// TestExperimentsObserved: an agent image runs four experiments, one
// after another: one finishes and writes a model, one crashes, one is
// OOM-killed by its container's memory limit, and the last runs until the
// deadline cuts it off. The worker sees them from the host (the
// container's cgroup and a stand-in nvidia-smi for the leased fake GPU):
// `starter experiments` lists all four with the right outcomes, the
// model's score linked from the mark that scored its checkpoint, and the
// run's result carries the measures; while it runs, the worker's
// Prometheus endpoint has the leased GPU's utilisation.
func TestExperimentsObserved(t *testing.T) {
	if _, err := os.Stat("/dev/nvidia0"); err != nil {
		testenv.Missing(t, "/dev/nvidia0, the fake GPU device .ci/slurm makes")
	}
	buildImage(t, "mlrb-lab:e2e", "labagent", staticBinary(t, "internal/e2e/testdata/labagent"),
		"FROM scratch\nCOPY labagent /labagent\nCMD [\"/labagent\"]\n")
	smi := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(smi, []byte(standInSMI), 0o755); err != nil {
		t.Fatal(err)
	}
	e := dockerEnv(t, "MLRB_CHECKPOINT_INTERVAL=2s", "MLRB_AGENT_GRACE=3s", "MLRB_EVAL_CURVE=[]", "MLRB_CONTAINER_MEMORY_MB=192",
		"MLRB_HOST_GPU_DEVICES=[0]", "MLRB_HOST_GPU_TYPE=A100-40GB", "MLRB_CONTAINER_GPUS=devices",
		"MLRB_OBSERVE_PROC_INTERVAL=200ms", "MLRB_OBSERVE_GPU_INTERVAL=300ms", "MLRB_OBSERVE_GPU_COMMAND=["+smi+"]", "MLRB_OBSERVE_MIN_EXPERIMENT=1s")
	envFile := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY=sk-e2e-unused\nHUGGINGFACE_TOKEN=hf-e2e-unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	e.vars = append(e.vars, "MLRB_AGENT_ENV_FILE="+envFile, "MLRB_METRICS_LISTEN="+metricsAddr)
	e.addTask("lab_baby_lm", "mini_baby_lm", map[string]string{`gpu_type: "", gpu_count: 0`: `gpu_type: "A100-40GB", gpu_count: 1`})
	e.worker = e.start("worker", "--dev")
	e.waitServer()

	var res struct {
		result
		Research *observe.Measures `json:"research"`
	}
	var started struct {
		RunID string `json:"run_id"`
	}
	e.starterJSON(&started, "run", "--task", "lab_baby_lm", "--label", "e2e-lab", "--image", "mlrb-lab:e2e", "--provider", "openai",
		"--time-limit", "20s", "--seed", "1", "--json")
	// While it runs, the worker's Prometheus endpoint has its GPU.
	gauge := `mlrb_gpu_utilization_percent{device="0"} 73`
	var page string
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(page, gauge) && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			page = string(b)
		}
	}
	if !strings.Contains(page, gauge) {
		t.Fatalf("the worker's metrics never had %s:\n%s", gauge, page)
	}
	e.starterJSON(&res, "result", started.RunID, "--wait", "--json")
	if res.Outcome != "limit_reached" || res.Score == nil || res.Research == nil {
		e.dumpLogs()
		t.Fatalf("result = %+v, research %+v", res.result, res.Research)
	}
	var r observe.Research
	e.starterJSON(&r, "experiments", res.RunID, "--json")
	want := []struct {
		command string
		outcome observe.Outcome
		model   bool
		gpu     bool
	}{
		{"experiment finish", observe.Ended, true, true},
		{"experiment crash", observe.Ended, false, false},
		{"experiment oom", observe.OOMKilled, false, false},
		{"experiment long", observe.CutOff, false, true},
	}
	if len(r.Experiments) != len(want) {
		e.dumpLogs()
		t.Fatalf("experiments: %+v", r.Experiments)
	}
	for i, w := range want {
		x := r.Experiments[i]
		if !strings.HasSuffix(x.Command, w.command) || x.Outcome != w.outcome || (x.Model != nil) != w.model || (x.GPUHours > 0) != w.gpu {
			t.Fatalf("experiment %d: %+v (model %+v), want %+v", i, x, x.Model, w)
		}
		if w.gpu && (x.MeanUtil == nil || *x.MeanUtil != 73 || x.GPUMiB != 2048) {
			t.Fatalf("experiment %d on the GPU: utilisation %v, memory %v MiB", i, x.MeanUtil, x.GPUMiB)
		}
	}
	if m := r.Experiments[0].Model; m.Path != "output/model" || m.Score == nil || m.Split != "dev" {
		t.Fatalf("the finished experiment's model %+v: want output/model scored by a mark on the dev split", m)
	}
	m := res.Research
	if m == nil || m.Experiments != 4 || m.ByOutcome[observe.OOMKilled] != 1 || m.ByOutcome[observe.CutOff] != 1 || m.FirstModelS == nil ||
		m.GPUBusyShare == nil || m.GPUHoursNoModel <= 0 || m.CutOffHours <= 0 {
		t.Fatalf("the result's research measures: %+v", m)
	}
	out, _, code := e.starter("experiments", res.RunID)
	t.Logf("starter experiments:\n%s", out)
	if code != 0 || !strings.Contains(out, "4 experiments") || !strings.Contains(out, "oom_killed") || !strings.Contains(out, "cut_off") {
		t.Fatalf("starter experiments: exit %d\n%s", code, out)
	}
}
