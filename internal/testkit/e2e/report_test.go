package e2e

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

// browser is a headless Chromium for the test; each action takes a
// context derived from the one returned.
func browser(t *testing.T) context.Context {
	t.Helper()
	chromium := testenv.Tool(t, "chromium", "apt-get install chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.WindowSize(1400, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	// The browser lives as long as the context of its first action.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// act runs a browser action with a timeout of its own.
func act[T any](t *testing.T, bctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// shoot keeps a screenshot (of sel, or the whole page) as a CI artifact.
func shoot(t *testing.T, bctx context.Context, name, sel string) {
	t.Helper()
	var png []byte
	if sel == "" {
		png = act(t, bctx, "screenshot "+name, chromedp.FullScreenshot(100))
	} else {
		png = act(t, bctx, "screenshot "+name, chromedp.Screenshot(chromedp.CSS(sel)))
	}
	f := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(f, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", f)
}

// TestResearchReport: a mini benchmark of the reference and no-op agents
// with curves on: each run's result, export and report hold its marks
// (at least four); the reference agent's curve rises and the no-op
// agent's is flat; the report opens from disk in Chromium (leaderboard,
// curves, a run page kept as screenshots); starter plan sizes the next
// benchmark from this one's spread.
func TestResearchReport(t *testing.T) {
	parallel(t)
	bctx := browser(t)
	e := newEnv(t, "MLRB_CHECKPOINT_INTERVAL=2s", "MLRB_EVAL_CURVE=[]")
	e.start("worker", "--dev")
	e.waitServer()
	const bench = "bench-report"
	if _, errs, code := e.starter("benchmark", "--agents", "reference,noop", "--tasks", "mini_baby_lm,mini_math_reasoning", "--seeds", "3",
		"--id", bench); code != 0 {
		t.Fatalf("benchmark: %s", errs)
	}
	// 12 runs and their curves: 25 s here alone, minutes on a loaded CI
	// machine, past what one starter command is given.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := e.client().GetWorkflow(ctx, bench, "").Get(ctx, nil); err != nil {
		e.dumpLogs()
		t.Fatalf("benchmark: %v", err)
	}
	var res struct {
		Curve []struct {
			Score *float64 `json:"score"`
		} `json:"curve"`
	}
	e.starterJSON(&res, "result", bench+"/reference/mini_baby_lm/s1", "--json")
	if len(res.Curve) < 4 {
		t.Fatalf("the result holds %d marks, want at least 4", len(res.Curve))
	}
	replayHistory(t, e, bench+"/reference/mini_baby_lm/s1", "lease_here_curve_scored.json")

	// The export: marks per run, rising for the reference agent, flat for
	// the no-op one.
	dir := t.TempDir()
	if out, errs, code := e.starter("export", bench, "--format", "csv", "-o", dir); code != 0 || !strings.Contains(out, "exported 12 runs") {
		t.Fatalf("export (exit %d): %s %s", code, out, errs)
	}
	marks := readCSV(t, filepath.Join(dir, "marks.csv"))
	byRun := map[string][]map[string]string{}
	for _, m := range marks {
		byRun[m["run_id"]] = append(byRun[m["run_id"]], m)
	}
	if len(byRun) != 12 {
		t.Fatalf("marks of %d runs, want 12", len(byRun))
	}
	rise := 0.0
	for run, ms := range byRun {
		if len(ms) < 4 {
			t.Fatalf("%s: %d marks", run, len(ms))
		}
		// A mark before the agent's first model has no score and no best
		// (a loaded machine takes the first checkpoint before the model
		// is written); from the first scored mark on, best never falls.
		var bests []float64
		for _, m := range ms {
			if m["best"] == "" {
				if len(bests) > 0 {
					t.Fatalf("%s: best so far vanished: %v", run, ms)
				}
				continue
			}
			bests = append(bests, num(t, m["best"]))
			if b := bests[len(bests)-1]; len(bests) > 1 && b < bests[len(bests)-2] {
				t.Fatalf("%s: best so far fell: %v", run, ms)
			}
		}
		switch {
		case strings.Contains(run, "/noop/"):
			for _, m := range ms {
				if m["score"] != "" && m["score"] != m["best"] {
					t.Fatalf("%s: the no-op agent's curve moves: %v", run, ms)
				}
			}
		case strings.Contains(run, "/mini_baby_lm/") && len(bests) > 0:
			rise += bests[len(bests)-1] - bests[0]
		}
	}
	if rise <= 0 {
		t.Fatalf("the reference agent's curves on mini_baby_lm do not rise: %v", byRun)
	}
	if out, errs, code := e.starter("export", bench, "-o", t.TempDir()); code != 0 {
		t.Fatalf("parquet export (exit %d): %s %s", code, out, errs)
	}
	out, errs, code := e.starter("plan", "--delta", "0.05", "--from", bench)
	if code != 0 || !strings.Contains(out, "mini_baby_lm") || !strings.Contains(out, "σ of reference − noop over 3 shared seeds") {
		t.Fatalf("plan (exit %d): %s %s", code, out, errs)
	}
	t.Logf("starter plan:\n%s", out)

	// The report, from disk, in Chromium.
	rep := t.TempDir()
	if out, errs, code := e.starter("report", bench, "-o", rep); code != 0 {
		t.Fatalf("report (exit %d): %s %s", code, out, errs)
	}
	act(t, bctx, "open the report", chromedp.Navigate("file://"+filepath.Join(rep, "index.html")))
	if n := act(t, bctx, "count rows", chromedp.Evaluate[int](`document.querySelectorAll("#leaderboard tbody tr").length`)); n != 4 {
		t.Fatalf("the leaderboard shows %d rows, want 4", n)
	}
	if n := act(t, bctx, "count curves", chromedp.Evaluate[int](`document.querySelectorAll(".chart svg.curve circle").length`)); n < 2*2*4 {
		t.Fatalf("the curves show %d points, want at least 4 per task and agent", n)
	}
	shoot(t, bctx, "report-leaderboard.png", "")
	shoot(t, bctx, "report-curve.png", "#curve-mini_baby_lm")
	act(t, bctx, "open a run", chromedp.Click(chromedp.CSS(`a.run[href*="reference_mini_baby_lm_s1"]`)))
	act(t, bctx, "run page", chromedp.WaitVisible(chromedp.CSS("#timeline svg")))
	if n := act(t, bctx, "count marks", chromedp.Evaluate[int](`document.querySelectorAll("#marks tbody tr").length`)); n < 4 {
		t.Fatalf("the run page shows %d marks", n)
	}
	if n := act(t, bctx, "count checkpoints", chromedp.Evaluate[int](`document.querySelectorAll("#checkpoints tbody tr").length`)); n < 2 {
		t.Fatalf("the run page shows %d checkpoints", n)
	}
	if log := act(t, bctx, "read the log", chromedp.Text(chromedp.CSS("#log"))); !strings.Contains(log, "start attempt=1") {
		t.Fatalf("the run page's log: %.500s", log)
	}
	shoot(t, bctx, "report-run.png", "")
}

func readCSV(t *testing.T, file string) []map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) == 0 {
		t.Fatalf("%s: %v", file, err)
	}
	var out []map[string]string
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, c := range rows[0] {
			m[c] = r[i]
		}
		out = append(out, m)
	}
	return out
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return x
}
