package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

// artifactDir is where tests keep what a person looks at afterwards
// (screenshots): $MLRB_TEST_ARTIFACTS, else a temp dir.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("MLRB_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "mlrb-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOfficialClients: a benchmark's runs, as the official `temporal` CLI
// and the Temporal Web UI (in headless Chromium) show them to a user.
func TestOfficialClients(t *testing.T) {
	parallel(t)
	temporal := testenv.Tool(t, "temporal", installTemporal)
	chromium := testenv.Tool(t, "chromium", "apt-get install chromium")
	uiPort := freePort(t)
	e := newEnv(t, "MLRB_DEV_UI_PORT="+strconv.Itoa(uiPort))
	e.start("worker", "--dev")
	e.waitServer()
	const bench = "bench-ui"
	if _, errs, code := e.starter("benchmark", "--agents", "noop", "--tasks", "mini_baby_lm,mini_mini_pile", "--seeds", "2", "--id", bench, "--wait"); code != 0 {
		e.dumpLogs()
		t.Fatalf("benchmark: %s", errs)
	}
	want := []string{bench + "/noop/mini_baby_lm/s1", bench + "/noop/mini_baby_lm/s2"}
	other := bench + "/noop/mini_mini_pile/s1"

	address := "127.0.0.1:" + strconv.Itoa(e.port)
	cli := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, temporal, append(args, "--address", address, "--namespace", "default", "-o", "json")...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("temporal %v: %v\n%s", args, err, out)
		}
		return out
	}

	// Visibility is eventually consistent: the last upserts land shortly
	// after the benchmark ends.
	query := `MlrbTask="mini_baby_lm" AND MlrbBenchmark="` + bench + `" AND MlrbOutcome="scored"`
	var ids []string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var listed []struct {
			Execution struct {
				WorkflowID string `json:"workflowId"`
			} `json:"execution"`
		}
		out := cli("workflow", "list", "--query", query)
		if err := json.Unmarshal(out, &listed); err != nil {
			t.Fatalf("temporal workflow list output: %v\n%s", err, out)
		}
		ids = ids[:0]
		for _, l := range listed {
			ids = append(ids, l.Execution.WorkflowID)
		}
		slices.Sort(ids)
		if slices.Equal(ids, want) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("temporal workflow list --query %s: %v, want %v", query, ids, want)
	}

	out := cli("workflow", "query", "--workflow-id", want[0], "--name", "status")
	var q struct {
		QueryResult []struct {
			Phase   string `json:"phase"`
			Outcome string `json:"outcome"`
			Task    string `json:"task"`
		} `json:"queryResult"`
	}
	if err := json.Unmarshal(out, &q); err != nil || len(q.QueryResult) != 1 {
		t.Fatalf("temporal workflow query output (%v):\n%s", err, out)
	}
	if st := q.QueryResult[0]; st.Phase != "done" || st.Outcome != "scored" || st.Task != "mini_baby_lm" {
		t.Fatalf("status query through the CLI: %+v", st)
	}

	// The Web UI, filtered by task, in the browser a user would use.
	page := "http://127.0.0.1:" + strconv.Itoa(uiPort) + "/namespaces/default/workflows?query=" +
		url.QueryEscape(`MlrbTask="mini_baby_lm" AND MlrbBenchmark="`+bench+`"`)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.WindowSize(1600, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	// The browser lives as long as the context of its first action: no
	// timeout on that one (chromedp's rule); each action gets its own.
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("open %s: %v", page, err)
	}
	var text string
	shown := func() bool { return strings.Contains(text, want[0]) && strings.Contains(text, want[1]) }
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !shown(); {
		time.Sleep(time.Second)
		ctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		var err error
		text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		cancel()
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(artifactDir(t), "webui-runs-by-task.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("Web UI screenshot: %s", shot)
	if !shown() {
		t.Fatalf("the Web UI filtered by task does not show %v; page text:\n%.3000s", want, text)
	}
	if strings.Contains(text, other) {
		t.Fatalf("the Web UI filtered by mini_baby_lm also shows %s", other)
	}

	// The stored leaderboard chart opens in the browser as it is: a bar
	// with an error bar per task and agent.
	svg := filepath.Join(e.state, "blobs", "benchmarks", bench, "leaderboard.svg")
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+svg)); err != nil {
		t.Fatalf("open %s: %v", svg, err)
	}
	bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg rect title").length`))
	if err != nil || bars != 2 {
		t.Fatalf("the chart in the browser has %d bars (%v), want one per task", bars, err)
	}
	if png, err = chromedp.Run(ctx, chromedp.FullScreenshot(100)); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	chart := filepath.Join(artifactDir(t), "leaderboard-chart.png")
	if err := os.WriteFile(chart, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("leaderboard chart: %s", chart)
}
