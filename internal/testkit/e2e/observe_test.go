package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/proto"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

// standInSMI is an nvidia-smi for the worker's host: device lines as the
// real one prints them for --query-gpu with --format=csv,noheader,nounits
// (nvidia-smi --help-query-gpu: index, utilization.gpu in %, memory.used
// in MiB, power.draw in W), and, for --query-compute-apps, the host pid of
// every process whose command line names a GPU experiment, holding
// 2048 MiB, as the driver reports the processes of a leased device. It
// reads /proc in one grep, not a fork per process: on a loaded CI machine
// a loop took longer than the 2.5 s experiment lives, and missed it.
const standInSMI = `#!/bin/sh
case "$1" in
--query-gpu=*) echo "0, 73, 20480, 251.30" ;;
--query-compute-apps=*)
  grep -lsaE 'experiment.(finish|long)' /proc/[0-9]*/cmdline | sed 's,^/proc/\([0-9]*\)/cmdline$,\1\, 2048,' ;;
*) echo "unknown query $1" >&2; exit 2 ;;
esac
`

// TestExperimentsObserved: a benchmark of an agent image that runs four
// experiments, one after another: one finishes and writes a model, one
// crashes, one is OOM-killed by its container's memory limit, and the
// last runs until the deadline cuts it off. The worker sees them from the
// host (the container's cgroup, and a stand-in nvidia-smi for the leased
// fake GPU): while it runs, the worker's Prometheus endpoint has the GPU's
// utilisation; `starter experiments` lists all four with the right
// outcomes and the model's score from the mark that scored its
// checkpoint; the measures and GPU dollars are in the run's result, the
// leaderboard, the export (with the experiments and GPU samples) and the
// report's run page, opened in headless Chromium; the run's history holds
// none of what was observed.
func TestExperimentsObserved(t *testing.T) {
	parallel(t)
	if _, err := os.Stat("/dev/nvidia0"); err != nil {
		testenv.Missing(t, "/dev/nvidia0, the fake GPU device .ci/slurm makes")
	}
	buildImage(t, "mlrb-lab:e2e", "labagent", staticBinary(t, "internal/testkit/e2e/testdata/labagent"),
		"FROM scratch\nCOPY labagent /labagent\nCMD [\"/labagent\"]\n")
	smi := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(smi, []byte(standInSMI), 0o755); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY=sk-e2e-unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	e := dockerEnv(t, "MLRB_CHECKPOINT_INTERVAL=2s", "MLRB_AGENT_GRACE=3s", "MLRB_EVAL_CURVE=[]", "MLRB_CONTAINER_MEMORY_MB=192",
		"MLRB_HOST_GPU_DEVICES=[0]", "MLRB_HOST_GPU_TYPE=A100-40GB", "MLRB_CONTAINER_GPUS=devices", "MLRB_AGENT_ENV_FILE="+envFile, "MLRB_METRICS_LISTEN="+metricsAddr,
		"MLRB_AGENTS_DIR="+agentDefs(t, map[string]string{"lab": "image: mlrb-lab:e2e\nprovider: openai\nmodel: gpt-4o\n"}),
		"MLRB_OBSERVE_PROC_INTERVAL=200ms", "MLRB_OBSERVE_GPU_INTERVAL=300ms", "MLRB_OBSERVE_GPU_COMMAND=["+smi+"]", "MLRB_OBSERVE_MIN_EXPERIMENT=1s")
	e.addTask("lab_baby_lm", "mini_baby_lm", map[string]string{`gpu_type: "", gpu_count: 0`: `gpu_type: "A100-40GB", gpu_count: 1`})
	e.worker = e.start("worker", "--dev")
	e.waitServer()

	const bench = "lab"
	if _, errs, code := e.starter("benchmark", "--agents", "lab", "--tasks", "lab_baby_lm", "--seeds", "1", "--time-limit", "20s", "--id", bench); code != 0 {
		t.Fatalf("benchmark: %s", errs)
	}
	// While it runs, the worker's Prometheus endpoint has its GPU.
	gauge := `mlrb_gpu_utilization_percent{device="0"} 73`
	var page string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(page, gauge) && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			page = string(b)
		}
	}
	if !strings.Contains(page, gauge) {
		t.Fatalf("the worker's metrics never had %s:\n%s", gauge, page)
	}
	e.awaitBenchmark(bench)
	runID := bench + "/lab/lab_baby_lm/s1"

	var res struct {
		result
		Research *runs.Measures `json:"research"`
		Cost     struct {
			GPUUSD *float64 `json:"gpu_usd"`
		} `json:"cost"`
	}
	e.starterJSON(&res, "result", runID, "--json")
	if res.Outcome != "limit_reached" || res.Score == nil || res.Research == nil || res.Cost.GPUUSD == nil || *res.Cost.GPUUSD <= 0 {
		e.dumpLogs()
		t.Fatalf("result = %+v, research %+v, GPU $ %v", res.result, res.Research, res.Cost.GPUUSD)
	}
	var r observe.Research
	e.starterJSON(&r, "experiments", runID, "--json")
	checkExperiments(t, e, r)
	m := res.Research
	if m.Experiments != 4 || m.ByOutcome[string(observe.OOMKilled)] != 1 || m.ByOutcome[string(observe.CutOff)] != 1 || m.FirstModelS == nil ||
		m.GPUBusyShare == nil || m.GPUHoursNoModel <= 0 || m.CutOffHours <= 0 {
		t.Fatalf("the result's research measures: %+v", m)
	}
	// The samples never pass through the workflow: its history holds
	// none of what was observed.
	store, err := blob.NewFS(filepath.Join(e.state, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := observe.Load(context.Background(), store, runID)
	if err != nil || len(obs) != 1 {
		t.Fatalf("observations %v, %v", obs, err)
	}
	hist := e.historyOf(runID, "")
	// Binary: payloads are the bytes the SDK wrote (JSON), unencoded.
	raw, err := proto.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"Task":"lab_baby_lm"`) {
		t.Fatal("the history's payloads are not readable here: the check below would pass blind")
	}
	for _, observed := range []string{"experiment oom", "labagent experiment", `"gpu_mib"`, `"oom_killed"`, `"mean_gpu_util"`} {
		if strings.Contains(string(raw), observed) {
			t.Fatalf("the run's history (%d events) holds %q, observed by the worker (%d GPU samples, %d processes)", len(hist.Events), observed, len(obs[0].GPU), len(obs[0].Procs))
		}
	}
	out, _, code := e.starter("experiments", runID)
	t.Logf("starter experiments:\n%s", out)
	if code != 0 || !strings.Contains(out, "4 experiments") || !strings.Contains(out, "oom_killed") || !strings.Contains(out, "cut_off") {
		t.Fatalf("starter experiments: exit %d\n%s", code, out)
	}
	checkBoardExportReport(t, e, bench, runID)
}

// checkExperiments: the lab agent's four experiments, in order, with
// their outcomes, the GPU the stand-in driver said two of them held, and
// the model of the first scored by a mark.
func checkExperiments(t *testing.T, e *env, r observe.Research) {
	t.Helper()
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
}

// checkBoardExportReport: the leaderboard's row has the research measures
// and GPU dollars; the export has the four experiments and the GPU
// samples; the report's run page draws the four in Chromium.
func checkBoardExportReport(t *testing.T, e *env, bench, runID string) {
	t.Helper()
	var board struct {
		Rows []struct {
			Research *struct {
				Runs               int     `json:"runs"`
				ExperimentsPerHour float64 `json:"experiments_per_hour"`
			} `json:"research"`
			Cost struct {
				GPUUSD float64 `json:"gpu_usd"`
			} `json:"cost"`
		} `json:"rows"`
	}
	e.starterJSON(&board, "results", bench, "--format", "json")
	if len(board.Rows) != 1 || board.Rows[0].Research == nil || board.Rows[0].Research.Runs != 1 || board.Rows[0].Research.ExperimentsPerHour <= 0 || board.Rows[0].Cost.GPUUSD <= 0 {
		t.Fatalf("leaderboard rows %+v", board.Rows)
	}
	exp := t.TempDir()
	if out, errs, code := e.starter("export", bench, "--format", "csv", "-o", exp); code != 0 {
		t.Fatalf("export (exit %d): %s %s", code, out, errs)
	}
	for file, want := range map[string]string{"experiments.csv": "oom_killed", "gpu_samples.csv": runID, "runs.csv": "A100-40GB at $1.29/GPU-h"} {
		b, err := os.ReadFile(filepath.Join(exp, file))
		if err != nil || !strings.Contains(string(b), want) {
			t.Fatalf("%s has no %q: %v\n%.600s", file, want, err, b)
		}
		if file == "experiments.csv" && strings.Count(string(b), "\n") != 5 {
			t.Fatalf("experiments.csv holds %d lines, want a header and 4 rows", strings.Count(string(b), "\n"))
		}
	}
	rep := t.TempDir()
	if out, errs, code := e.starter("report", bench, "-o", rep); code != 0 {
		t.Fatalf("report (exit %d): %s %s", code, out, errs)
	}
	bctx := browser(t)
	act(t, bctx, "open the report", chromedp.Navigate("file://"+filepath.Join(rep, "index.html")))
	act(t, bctx, "open the run", chromedp.Click(chromedp.CSS(`a.run`)))
	act(t, bctx, "run page", chromedp.WaitVisible(chromedp.CSS("#research svg.research")))
	if n := act(t, bctx, "count experiments", chromedp.Evaluate[int](`document.querySelectorAll("#research svg rect.exp").length`)); n != 4 {
		t.Fatalf("the research timeline draws %d experiments, want 4", n)
	}
	if n := act(t, bctx, "count OOM kills", chromedp.Evaluate[int](`document.querySelectorAll("#experiments tr.oom_killed").length`)); n != 1 {
		t.Fatalf("the experiments table shows %d OOM kills, want 1", n)
	}
	if txt := act(t, bctx, "read the measures", chromedp.Text(chromedp.CSS("#measures"))); !strings.Contains(txt, "4 experiments") {
		t.Fatalf("the run page's measures: %q", txt)
	}
	shoot(t, bctx, "report-research.png", "#research")
}
