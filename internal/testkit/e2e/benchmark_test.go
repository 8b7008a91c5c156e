package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/mlrb/mlrb/internal/scoring/reference"
)

// TestBenchmarkResume: a benchmark is terminated with one run scored and
// one mid-way. `starter benchmark resume` keeps the scored run (its agent
// does not start again) and continues the other from its last checkpoint;
// `starter watch` follows the resumed benchmark to its leaderboard.
func TestBenchmarkResume(t *testing.T) {
	parallel(t)
	e := crashEnv(t, hbTimeout)
	// Checkpoints 4 s apart leave a wide gap in which to terminate.
	e.vars = append(e.vars, "MLRB_CHECKPOINT_INTERVAL=4s")
	e.addTask("e2e_fast", "mini_baby_lm", map[string]string{"trials: 24": "trials: 3"})
	// The same task with a dtype rule the reference model (float32) breaks.
	e.addTask("e2e_dq", "mini_baby_lm", map[string]string{"trials: 24": "trials: 3", "  allowed_dtypes: [float32]": "  allowed_dtypes: [bfloat16]"})
	e.start("worker", "--dev")
	e.waitServer()
	const bench = "bench-resume"
	if _, errs, code := e.starter("benchmark", "--agents", "reference", "--tasks", "e2e_fast,e2e_crash", "--seeds", "1", "--id", bench, "--concurrency", "2"); code != 0 {
		t.Fatalf("benchmark: %s", errs)
	}
	fast, slow := bench+"/reference/e2e_fast/s1", bench+"/reference/e2e_crash/s1"
	c := e.client()
	ctx := context.Background()
	var res result
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := c.DescribeWorkflowExecution(ctx, fast, ""); err == nil {
			break
		}
	}
	e.starterJSON(&res, "result", fast, "--wait", "--json")
	if res.Outcome != "scored" {
		t.Fatalf("fast run: %+v", res)
	}
	e.waitCheckpoints(slow, 1)
	// Work past the checkpoint: the termination loses it, and the
	// continued run's ledger must say so (some of a checkpoint interval:
	// on a loaded host the next checkpoint may come before the
	// termination does).
	time.Sleep(time.Second)
	if _, errs, code := e.starter("benchmark", "resume", bench); code != 2 || !strings.Contains(errs, "still running") {
		t.Fatalf("resuming a running benchmark must be refused (exit %d): %s", code, errs)
	}

	if err := c.TerminateWorkflow(ctx, bench, "", "e2e: an operator stops the benchmark"); err != nil {
		t.Fatal(err)
	}
	// Its runs outlive it (they are abandoned, so that a benchmark can
	// continue as new): the operator stops the run under way as well.
	if d, err := c.DescribeWorkflowExecution(ctx, slow, ""); err != nil || d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("the run must outlive its terminated benchmark: %v", err)
	}
	if err := c.TerminateWorkflow(ctx, slow, "", "e2e: an operator stops the benchmark's run"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		d, err := c.DescribeWorkflowExecution(ctx, slow, "")
		if err == nil && d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	out, errs, code := e.starter("benchmark", "resume", bench)
	if code != 0 || !strings.Contains(out, "1 runs kept, 1 to run: "+slow) {
		t.Fatalf("resume (exit %d): %s %s", code, out, errs)
	}
	watch, errs, code := e.starter("watch", bench, "--refresh", "500ms")
	if code != 0 {
		t.Fatalf("watch (exit %d): %s", code, errs)
	}
	for _, want := range []string{"benchmark " + bench + ": 1 of 2 runs done", "e2e_crash/reference", "budget left", "last checkpoint", "mean (n scored)"} {
		if !strings.Contains(watch, want) {
			t.Fatalf("watch output has no %q:\n%s", want, watch)
		}
	}
	if !regexp.MustCompile(`e2e_fast/reference +\[#{16}\] +1/1 `).MatchString(watch) {
		t.Fatalf("watch shows no full progress bar for the kept task:\n%s", watch)
	}
	out, _, code = e.starter("results", bench, "--format", "csv")
	if code != 0 || !strings.Contains(out, "e2e_crash,reference,1,1,0,") || !strings.Contains(out, "e2e_fast,reference,1,1,0,") {
		t.Fatalf("leaderboard after the resume: %s", out)
	}
	if s := readStarts(t, e, fast); len(s) != 1 {
		t.Fatalf("the kept run's agent started again: %q", s)
	}
	// The continued run numbers its attempts on and resumes its workspace.
	s := readStarts(t, e, slow)
	if len(s) != 2 || !strings.Contains(s[1], "resumed=1") {
		t.Fatalf("the continued run must resume from its checkpoint: %q", s)
	}
	e.starterJSON(&res, "result", slow, "--json")
	if res.Outcome != "scored" || res.Attempts != 2 || res.Budget.UsedS < 10 || res.Budget.LostS <= 0 || res.Budget.LostS > 4.5 {
		t.Fatalf("continued run: %+v", res)
	}
	t.Logf("continued run's ledger: %+v", res.Budget)
	replayHistory(t, e, slow, "lease_here_run_continued.json")
	replayHistory(t, e, bench, "benchmark_resumed.json")
	if out, _, code := e.starter("list", "--benchmarks"); code != 0 || !strings.Contains(out, bench) {
		t.Fatalf("list --benchmarks (exit %d): %s", code, out)
	}
	if out, _, code := e.starter("benchmark", "resume", bench); code != 0 || !strings.Contains(out, "nothing to run") {
		t.Fatalf("a benchmark with every result needs no resume (exit %d): %s", code, out)
	}
	disqualifiedInTheLeaderboard(t, e)
}

// disqualifiedInTheLeaderboard: a benchmark whose e2e_dq runs break their
// task's dtype rule shows them as runs that did not succeed (scored
// 0 of 2, 2 disqualified) with no mean, beside e2e_fast's scored runs.
func disqualifiedInTheLeaderboard(t *testing.T, e *env) {
	out, errs, code := e.starter("benchmark", "--agents", "reference", "--tasks", "e2e_fast,e2e_dq", "--seeds", "2", "--id", "bench-dq",
		"--concurrency", "2", "--wait", "--format", "csv")
	if code != 0 {
		t.Fatalf("benchmark (exit %d): %s", code, errs)
	}
	var res result
	e.starterJSON(&res, "result", "bench-dq/reference/e2e_dq/s1", "--json")
	if res.Outcome != "disqualified" || res.Score != nil || !strings.Contains(res.Reason, "are float32; allowed: bfloat16") || res.Metrics["disqualified/score"] <= 0 {
		t.Fatalf("disqualified run: %+v", res)
	}
	if !strings.Contains(out, "e2e_dq,reference,2,0,2,0,2,0.0000,") || !strings.Contains(out, "e2e_fast,reference,2,2,0,0,0,1.0000,") {
		t.Fatalf("leaderboard: want e2e_dq 2 runs, 0 scored, 2 agent failures (disqualified), success 0, no mean; e2e_fast 2 scored:\n%s", out)
	}
	measuredAnchors(t, e)
}

// measuredAnchors: `starter anchors measure` scores e2e_fast's baseline
// (the no-op agent's untrained model) and top (the reference agent)
// with this system's evaluator and stores them with their runs; then
// `starter results` shows, beside bench-dq's raw means, the share of the
// gap each closed, in every format: e2e_dq's disqualified runs count at
// its baseline (0 %), so the reference agent's mean is over both tasks.
func measuredAnchors(t *testing.T, e *env) {
	for _, m := range [][]string{{"baseline", "noop"}, {"top", "reference"}} {
		out, errs, code := e.starter("anchors", "measure", "e2e_fast", "--role", m[0], "--agent", m[1])
		if code != 0 || !strings.Contains(out, "e2e_fast "+m[0]+": ") || !strings.Contains(out, "run anchor-e2e_fast-"+m[0]) || !strings.Contains(out, "evaluator "+reference.Evaluator()) {
			t.Fatalf("anchors measure %s (exit %d): %s %s", m[0], code, out, errs)
		}
	}
	if out, _, code := e.starter("anchors", "list"); code != 0 || !strings.Contains(out, "agent noop") || !strings.Contains(out, "e2e_dq") {
		t.Fatalf("anchors list (exit %d): %s", code, out)
	}
	want := map[string]string{"table": "gap closed %", "md": "| gap closed % [95 % CI] |", "csv": "gap_closed_pct,gap_closed_low,gap_closed_high,baseline,top", "json": `"gap_closed_pct":`, "svg": "e2e_fast"}
	for format, w := range want {
		out, errs, code := e.starter("results", "bench-dq", "--format", format)
		if code != 0 || !strings.Contains(out, w) || !strings.Contains(out, "e2e_fast") {
			t.Fatalf("results --format %s (exit %d): %s\n%s", format, code, errs, out)
		}
	}
	out, _, _ := e.starter("results", "bench-dq", "--format", "table")
	if !regexp.MustCompile(`e2e_fast +reference +2 +2/0/0 +100% \[\d+, 100\] +0\.\d+ \(n=2\) +\[[-0-9.]+, [-0-9.]+\] t +[-0-9.]+ \[[-0-9.]+, [-0-9.]+\] +-?\d+\.\d \[`).MatchString(out) ||
		!strings.Contains(out, "gap closed, mean over 2 tasks with anchors (failures at the baseline): reference") {
		t.Fatalf("the table shows no gap closed for e2e_fast:\n%s", out)
	}
	// Measured and scored by one evaluator (the worker's {self}), named
	// by its scoring code: no warning that the gap compares two.
	if strings.Contains(out, "compares two evaluators") {
		t.Fatalf("anchors and runs of one evaluator compared as two:\n%s", out)
	}
	t.Logf("leaderboard with measured anchors:\n%s", out)
	reattachedAnchor(t, e)
}

// reattachedAnchor: `starter anchors measure` killed while its runs go on
// loses nothing; given again, it attaches to the measurement under way
// (its id is the task's and the role's) and stores its anchor.
func reattachedAnchor(t *testing.T, e *env) {
	args := []string{"anchors", "measure", "e2e_fast", "--role", "baseline", "--agent", "idle", "--time-limit", "8s", "--seeds", "2"}
	p := e.start("starter", args...)
	id := "anchor-e2e_fast-baseline"
	deadline := time.Now().Add(time.Minute)
	for {
		if _, _, code := e.starter("status", id+"-s1"); code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the measurement's run %s-s1 never started", id)
		}
		time.Sleep(200 * time.Millisecond)
	}
	p.kill(t)
	other := append(append([]string{}, args[:len(args)-2]...), "--seeds", "3")
	if _, errs, code := e.starter(other...); code != 2 || !strings.Contains(errs, "is being measured already") {
		t.Fatalf("another measurement of the same anchor under way (exit %d): %s", code, errs)
	}
	out, errs, code := e.starter(args...)
	if code != 0 || !strings.Contains(errs, "attached to the measurement under way") || !strings.Contains(out, "e2e_fast baseline: ") {
		t.Fatalf("anchors measure again (exit %d): %s %s", code, out, errs)
	}
	replayHistory(t, e, id, "anchor_measured.json")
}
