// Command report measures `starter report`'s engine at size: the time and
// bytes of the report of a benchmark of 350 runs (7 tasks × 2 agents × 25
// seeds, each with a curve, attempts and 2,000 checkpoints as a 24 h run
// at 43 s keeps), and of one run with 100,000 recorded LLM calls (written
// through the gateway's recorder to a blob store on disk), and the time
// Chromium takes to show that run page's first page of calls.
package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/report"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/llm"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/observe/observetest"
	"github.com/mlrb/mlrb/internal/sandbox/transcript"
	"github.com/mlrb/mlrb/internal/store/blob"
)

func main() {
	nRuns := flag.Int("runs", 350, "runs in the benchmark report")
	nCalls := flag.Int("calls", 100_000, "LLM calls of the one-run report")
	chromium := flag.String("chromium", "chromium", "Chromium to time the run page with (\"\": skip)")
	flag.Parse()
	if err := bench(*nRuns, *nCalls, *chromium); err != nil {
		fmt.Fprintln(os.Stderr, "bench/report:", err)
		os.Exit(1)
	}
}

func bench(nRuns, nCalls int, chromium string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "mlrb-bench-report-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := blob.NewFS(filepath.Join(dir, "store"))
	if err != nil {
		return err
	}
	var rs []runs.Result
	tasks := []string{"baby_lm", "edge_llm_compression", "edge_llm_training", "llm_efficiency", "llm_merging", "math_reasoning", "mini_pile"}
	for i := 0; len(rs) < nRuns; i++ {
		rs = append(rs, result(fmt.Sprintf("bench/%s/%s/s%d", []string{"a", "b"}[i%2], tasks[(i/2)%7], i/14), tasks[(i/2)%7], []string{"a", "b"}[i%2], int64(i/14), i))
	}
	t0 := time.Now()
	out := filepath.Join(dir, "bench-report")
	if err := report.Write(ctx, out, report.Input{Title: "bench", Results: rs, Store: store, Setup: leaderboard.Setup{}}); err != nil {
		return err
	}
	fmt.Printf("report of %d runs (each a curve, 3 attempts, 2,000 checkpoints): %s, %s on disk\n", len(rs), time.Since(t0).Round(time.Millisecond), size(out))

	big := result("bench/a/llm_efficiency/big", "llm_efficiency", "a", 0, 0)
	t0 = time.Now()
	if err := record(store, big.RunID, nCalls); err != nil {
		return err
	}
	fmt.Printf("recorded %d calls through the recorder in %s\n", nCalls, time.Since(t0).Round(time.Millisecond))
	one := filepath.Join(dir, "run-report")
	t0 = time.Now()
	if err := report.Write(ctx, one, report.Input{Title: big.RunID, Results: []runs.Result{big}, Store: store}); err != nil {
		return err
	}
	fmt.Printf("report of one run with %d calls (%d pages of %d): %s, %s on disk\n", nCalls, (nCalls+report.CallsPerPage-1)/report.CallsPerPage, report.CallsPerPage,
		time.Since(t0).Round(time.Millisecond), size(one))
	day, err := observedDay(ctx, store, dir)
	if err != nil {
		return err
	}
	if chromium == "" {
		return nil
	}
	d, err := firstPage(chromium, filepath.Join(one, "runs", report.Key(big.RunID)+".html"), "#calls tbody tr")
	if err != nil {
		return err
	}
	fmt.Printf("Chromium shows the run page's first page of calls in %s (from navigation to the first row)\n", d.Round(time.Millisecond))
	d, err = firstPage(chromium, day, "#research svg.research")
	if err != nil {
		return err
	}
	fmt.Printf("Chromium shows the 24 h observed run's page with its research timeline in %s (from navigation to the timeline)\n", d.Round(time.Millisecond))
	return nil
}

// observedDay writes the report of a 24 h run observed at the defaults
// (observetest.Day: 200 experiments, 8 GPUs every 30 s, 3,000 calls)
// and returns its run page.
func observedDay(ctx context.Context, store blob.Store, dir string) (string, error) {
	o := observetest.Day()
	if err := observe.Put(ctx, store, o); err != nil {
		return "", err
	}
	r := result(o.RunID, "baby_lm", "a", 1, 1)
	r.Budget = budget.Account{LimitS: 86400, UsedS: 86400}
	out := filepath.Join(dir, "day-report")
	t0 := time.Now()
	if err := report.Write(ctx, out, report.Input{Title: r.RunID, Results: []runs.Result{r}, Store: store}); err != nil {
		return "", err
	}
	fmt.Printf("report of a 24 h observed run (%d experiments, %d GPU samples, %d calls): %s\n", len(o.Procs)-2, len(o.GPU), len(o.Calls), time.Since(t0).Round(time.Millisecond))
	return filepath.Join(out, "runs", report.Key(r.RunID)+".html"), nil
}

// result is a finished 24 h run as a benchmark keeps it.
func result(id, task, agent string, seed int64, i int) runs.Result {
	score := 0.4 + float64(i%17)/40
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	r := runs.Result{RunID: id, Task: task, Agent: agent, Seed: seed, Outcome: runs.OutcomeScored, Score: &score, Attempts: 3, Checkpoints: 2000,
		Budget: budget.Account{LimitS: 86400, UsedS: 86400, LostS: 600}, Metrics: map[string]float64{"acc": score}, TimeLimitS: 86400,
		Cost: runs.Cost{GPUHours: 24, LLM: &llm.Ledger{Usage: llm.Usage{Calls: 1000, USD: 40}}}}
	for n := 1; n <= 3; n++ {
		r.AttemptLog = append(r.AttemptLog, runs.AttemptRecord{N: n, Host: "gpu-1", LeaseWaitS: 30, LeasedAt: at.Add(time.Duration(n-1) * 8 * time.Hour),
			EndedAt: at.Add(time.Duration(n) * 8 * time.Hour), FromS: float64(n-1) * 28800, ToS: float64(n) * 28800, End: "lost"})
	}
	for s := 1; s <= 2000; s++ {
		r.CheckpointLog = append(r.CheckpointLog, runs.CheckpointInfo{Seq: s, Attempt: 1 + s/700, At: at.Add(time.Duration(s) * 43 * time.Second), AgentS: float64(s) * 43,
			Files: 3000, Bytes: 20 << 30, NewBytes: 200 << 20})
	}
	for k, h := range []float64{1, 2, 4, 8, 16} {
		v := score * float64(k+1) / 5
		r.Curve = append(r.Curve, runs.Mark{AtS: h * 3600, Seq: int(h * 3600 / 43), AgentS: h * 3600, Score: &v, Split: contract.SplitTest, Tries: 1})
	}
	runs.BestSoFar(r.Curve)
	r.Evaluations = []runs.EvalAttempt{{Started: at.Add(24 * time.Hour), At: at.Add(25 * time.Hour), Score: &score}}
	return r
}

// record writes n calls of a 24 h run through the gateway's recorder:
// prompts that grow by a turn each call, as an agent's do.
func record(store blob.Store, runID string, n int) error {
	rec := &transcript.Recorder{Store: store, RunID: runID, Attempt: 1}
	history := strings.Repeat("You are an ML research agent. ", 40)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		turn := fmt.Sprintf("step %d: trained for another epoch, loss %.3f; ", i, 2.0/float64(i+1))
		if len(history) < 16<<10 {
			history += turn
		}
		req := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"` + history + turn + `"}]}`)
		resp := []byte(fmt.Sprintf(`{"choices":[{"message":{"content":"Next, try learning rate %d e-4."}}],"usage":{"prompt_tokens":%d,"completion_tokens":40}}`, i%9+1, len(req)/4))
		rec.Add(transcript.Call{Kind: transcript.KindLLM, API: llm.ChatCompletions, Model: "gpt-4o", Status: 200, Start: start.Add(time.Duration(i) * 864 * time.Millisecond),
			LatencyMS: 900, Usage: llm.Usage{Calls: 1, Tokens: llm.Tokens{Input: int64(len(req) / 4), Output: 40}, USD: 0.001}}, req, resp)
		if i%1000 == 999 {
			rec.Wait()
		}
	}
	rec.Wait()
	return nil
}

// firstPage times Chromium from opening a run page to the element sel.
func firstPage(chromium, page, sel string) (time.Duration, error) {
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		return 0, fmt.Errorf("chromium: %w", err)
	}
	ctx, cancelT := context.WithTimeout(bctx, time.Minute)
	defer cancelT()
	t0 := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		return 0, fmt.Errorf("run page: %w", err)
	}
	return time.Since(t0), nil
}

func size(dir string) string {
	var n int64
	files := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
				files++
			}
		}
		return nil
	})
	return fmt.Sprintf("%.1f MiB in %d files", float64(n)/(1<<20), files)
}
