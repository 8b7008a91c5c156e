package show

import (
	"bytes"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/workflows"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func contains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, got)
		}
	}
}

func TestProgressViews(t *testing.T) {
	p := workflows.Progress{Total: 4, Done: 2, PerTask: map[string]map[runs.ChildState]int{
		"mini_pile/reference": {runs.ChildQueued: 1, runs.ChildRunning: 1, runs.StateOf(runs.OutcomeScored): 1, runs.StateOf(runs.OutcomeInfraFailed): 1},
	}, Running: []string{"b/reference/mini_pile/s2"}, RunningTotal: 3}
	var line bytes.Buffer
	ProgressLine(&line, p)
	if got := line.String(); !strings.Contains(got, " 2/4 ") || !strings.Contains(got, "running 1") || strings.Count(got, "\n") != 1 {
		t.Fatalf("progress line: %q", got)
	}
	st := workflows.Status{RunID: "b/reference/mini_pile/s2", Phase: runs.PhaseRunning, Attempt: 2, Checkpoints: 3,
		LastCheckpointAt: now.Add(-4 * time.Second), AttemptStartedAt: now.Add(-10 * time.Second), Budget: budget.Account{LimitS: 100, UsedS: 20}}
	var full bytes.Buffer
	WriteProgress(&full, "b", p, map[string]workflows.Status{st.RunID: st}, now)
	contains(t, "watch view", full.String(), "benchmark b: 2 of 4 runs done", "mini_pile/reference", "under way (the first 1 of 3):", "attempt 2",
		"budget left    76.0s", "last checkpoint 4.0s ago")
}

// TestStatusOfCountsTheClock: what the workflow cannot know without a
// clock (the checkpoint's age, the lease wait in progress, the budget
// left) is counted at now, and a wait under way adds to the infra wait.
func TestStatusOfCountsTheClock(t *testing.T) {
	st := workflows.Status{RunID: "r", Phase: runs.PhaseLeasing, LastCheckpointAt: now.Add(-90 * time.Second), LeasingSince: now.Add(-30 * time.Second),
		Budget: budget.Account{LimitS: 100, UsedS: 20, InfraWaitS: 5}}
	v := StatusOf(st, now)
	if v.LastCheckpointAgeS == nil || *v.LastCheckpointAgeS != 90 || v.LeaseWaitS == nil || *v.LeaseWaitS != 30 || v.Budget.InfraWaitS != 35 {
		t.Fatalf("view %+v", v)
	}
	if v.BudgetLeftS != 80 { // 100 s granted, 20 s used, no attempt running
		t.Fatalf("budget left %v", v.BudgetLeftS)
	}
	if fresh := StatusOf(workflows.Status{RunID: "r"}, now); fresh.LastCheckpointAgeS != nil || fresh.LeaseWaitS != nil {
		t.Fatalf("a run with no checkpoint and no wait: %+v", fresh)
	}
}

// TestWriteStatusSaysWhatToDo: a failing checkpoint, a run that waits
// for a retry and one that waits for its person each say so, with the
// command that moves it on; an agent's text cannot drive the terminal.
func TestWriteStatusSaysWhatToDo(t *testing.T) {
	v := Status{RunID: "r", Task: "t", Phase: runs.PhaseAwaitingEvalRetry, CheckpointFailures: 2, CheckpointStale: true, CheckpointError: "put\x1b[2J failed",
		Waiting: &workflows.Waiting{Until: now, Error: "eval crashed", Log: "starter logs r", Retry: "starter retry-eval r"}}
	var b bytes.Buffer
	WriteStatus(&b, v)
	got := b.String()
	contains(t, "status", got, "checkpoint   STALE: 2 failed in a row", `put\x1b[2J failed`, "waiting      for a retry until 2026-01-01T00:00:00Z: eval crashed",
		"its log:   starter logs r", "retry:     starter retry-eval r", "(last none yet)")
	if strings.Contains(got, "\x1b") {
		t.Fatalf("an escape reached the terminal: %q", got)
	}
	b.Reset()
	WriteStatus(&b, Status{RunID: "h", Phase: runs.PhaseAwaitingPerson, Budget: budget.Account{PausedS: 60}})
	contains(t, "a person's run", b.String(), "for its person (no GPU held; paused 60s so far): `starter invite h --label NAME`")
}

// TestWriteCurveStates: each mark says what became of it.
func TestWriteCurveStates(t *testing.T) {
	score, best := 0.25, 0.5
	marks := []runs.Mark{
		{AtS: 3600, Seq: 4, AgentS: 3500, Score: &score, Best: &best, Split: "dev"},
		{AtS: 7200, NoModel: "no model dir"},
		{AtS: 10800, Error: "evaluator\x1b[2J crashed", Tries: 3},
		{AtS: 14400},
	}
	var b bytes.Buffer
	WriteCurve(&b, "curve  ", marks)
	got := b.String()
	contains(t, "curve", got, "curve  1h0m0s", "#4 at 58m20s", "0.2500 (best 0.5000)", "no model yet", "failed after 3 tries: evaluator", "pending", "no checkpoint")
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[1], "       ") {
		t.Fatalf("one line a mark, the label once: %q", got)
	}
}

func TestWriteResult(t *testing.T) {
	score := 0.5
	r := &runs.Result{RunID: "r", Task: "t", Agent: "a", Outcome: runs.OutcomeScored, Score: &score, Reason: "bad\x1b[2Jthing",
		Budget: budget.Account{LimitS: 60, UsedS: 30, LostS: 2}, Violations: []string{"too big"}, Research: &runs.Measures{Experiments: 3, LongestStallS: 3725}}
	var b bytes.Buffer
	WriteResult(&b, r)
	contains(t, "result", b.String(), "score      0.5000", "granted 60s, used 30.0s, lost 2.0s", "violation  too big", `bad\x1b[2Jthing`,
		"research   3 experiments", "longest stall 1:02:05", "`starter experiments r`")
	b.Reset()
	WriteResult(&b, &runs.Result{RunID: "u", Outcome: runs.OutcomeAgentFailed})
	contains(t, "an unscored result", b.String(), "score      —")
}

func TestRunAndNames(t *testing.T) {
	st := workflows.Status{RunID: "r", Task: "t", Agent: "a", Seed: 2, Phase: runs.PhaseRunning, CheckpointFailures: 1, CheckpointError: "full", Budget: budget.Account{LimitS: 100}}
	var b bytes.Buffer
	WriteRun(&b, st, now)
	contains(t, "a run under way", b.String(), "run r (t, agent a, seed 2)", "budget  [", "checkpoint failing (1 in a row): full", "no checkpoint yet")
	if Bar(2, 4) != "[####]" || Bar(-1, 4) != "[....]" || Bar(0.5, 4) != "[##..]" {
		t.Fatalf("bars %s %s %s", Bar(2, 4), Bar(-1, 4), Bar(0.5, 4))
	}
	if StatusName(enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT) != "timed out" || AgentClock(59.6) != "0:01:00" {
		t.Fatal("names")
	}
}
