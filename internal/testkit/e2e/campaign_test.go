package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"
)

// TestBenchmarkContinuesAsNew: a benchmark of ten runs that starts three
// per execution continues as new again and again; it is terminated mid-way
// with its runs, resumed, watched to its end. Every run is counted once,
// `results` reads them all from the store, and no event in any of its
// executions' histories comes near Temporal's payload limit.
func TestBenchmarkContinuesAsNew(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.vars = append(e.vars, "MLRB_CHECKPOINT_INTERVAL=2s")
	// The idle agent (the no-op agent that keeps its budget) on tasks of
	// 4 s: plain no-op runs end in under 0.1 s, so the whole benchmark
	// could end before its second execution is seen. An idle run lasts
	// until its soft deadline (3 s: the grace is at most a quarter of the
	// budget), so five waves of two take at least 15 s and the benchmark
	// is still under way, whatever the machine's speed, when it is stopped.
	tasks := []string{"e2e_can_lm", "e2e_can_eff"}
	e.addTask(tasks[0], "mini_baby_lm", map[string]string{"time_limit: 30s": "time_limit: 4s"})
	e.addTask(tasks[1], "mini_llm_efficiency", map[string]string{"time_limit: 30s": "time_limit: 4s"})
	e.start("worker", "--dev")
	e.waitServer()
	const bench = "bench-campaign"
	if _, errs, code := e.starter("benchmark", "--agents", "idle", "--tasks", strings.Join(tasks, ","), "--seeds", "5",
		"--concurrency", "2", "--continue-after", "3", "--id", bench); code != 0 {
		t.Fatalf("benchmark: %s", errs)
	}
	c := e.client()
	ctx := context.Background()
	// Wait for the second execution, then stop the benchmark and the runs
	// under way, as an operator would.
	var prog struct {
		Execution int `json:"execution"`
	}
	for deadline := time.Now().Add(90 * time.Second); prog.Execution < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the benchmark never continued as new: %+v", prog)
		}
		if v, err := c.QueryWorkflow(ctx, bench, "", "progress"); err == nil {
			_ = v.Get(&prog)
		}
	}
	if err := c.TerminateWorkflow(ctx, bench, "", "e2e: stopped mid-way"); err != nil {
		t.Fatal(err)
	}
	// Once the benchmark is terminated no run starts: stop those under way
	// (runs outlive their benchmark, being abandoned).
	for _, task := range tasks {
		for seed := 1; seed <= 5; seed++ {
			rid := fmt.Sprintf("%s/idle/%s/s%d", bench, task, seed)
			d, err := c.DescribeWorkflowExecution(ctx, rid, "")
			if err == nil && d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				if err := c.TerminateWorkflow(ctx, rid, "", "e2e: stopped with its benchmark"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	out, errs, code := e.starter("benchmark", "resume", bench)
	if code != 0 || !strings.Contains(out, "resumed:") {
		t.Fatalf("resume (exit %d): %s %s", code, out, errs)
	}
	t.Logf("%s", strings.TrimSpace(out))
	watch, errs, code := e.starter("watch", bench, "--refresh", "300ms")
	if code != 0 || !strings.Contains(watch, "mean (n scored)") {
		t.Fatalf("watch (exit %d): %s\n%s", code, errs, watch)
	}
	var lb struct {
		Rows []struct {
			Task string `json:"task"`
			Runs int    `json:"runs"`
		} `json:"rows"`
		Runs []struct {
			Task string `json:"task"`
			Seed int64  `json:"seed"`
		} `json:"runs"`
	}
	e.starterJSON(&lb, "results", bench, "--format", "json")
	seen := map[string]int{}
	for _, r := range lb.Runs {
		seen[fmt.Sprintf("%s/s%d", r.Task, r.Seed)]++
	}
	if len(lb.Runs) != 10 || len(seen) != 10 {
		t.Fatalf("the leaderboard must hold each of the 10 runs once: %v", seen)
	}
	for _, r := range lb.Rows {
		if r.Runs != 5 {
			t.Fatalf("rows %+v", lb.Rows)
		}
	}
	var res struct {
		Total int                       `json:"total"`
		Ended map[string]map[string]int `json:"ended"`
	}
	if err := c.GetWorkflow(ctx, bench, "").Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, per := range res.Ended {
		for _, k := range per {
			n += k
		}
	}
	if res.Total != 10 || n != 10 {
		t.Fatalf("the resumed benchmark counted %d of %d runs: %+v", n, res.Total, res.Ended)
	}
	// Every execution of the benchmark, the terminated ones included.
	list, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q", bench)})
	if err != nil {
		t.Fatal(err)
	}
	execs := list.GetExecutions()
	sort.Slice(execs, func(i, j int) bool { return execs[i].GetStartTime().AsTime().Before(execs[j].GetStartTime().AsTime()) })
	if len(execs) < 4 {
		t.Fatalf("%d executions; three runs an execution over ten runs and a resume continue as new at least twice", len(execs))
	}
	// The first execution, which continued as new, and the last.
	replayExecution(t, e, bench, execs[0].GetExecution().GetRunId(), "benchmark_continued_as_new.json")
	replayExecution(t, e, bench, execs[len(execs)-1].GetExecution().GetRunId(), "benchmark_ended.json")
	largest := 0
	for _, x := range execs {
		it := c.GetWorkflowHistory(ctx, bench, x.GetExecution().GetRunId(), false, 0)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if sz := proto.Size(ev); sz > largest {
				largest = sz
			}
		}
	}
	if largest >= 256<<10 {
		t.Fatalf("an event of %d bytes in the benchmark's histories", largest)
	}
	t.Logf("%d executions; the largest event in their histories is %d bytes", len(execs), largest)
	if out, _, code := e.starter("benchmark", "resume", bench); code != 0 || !strings.Contains(out, "nothing to run") {
		t.Fatalf("a benchmark with every result needs no resume (exit %d): %s", code, out)
	}
}
