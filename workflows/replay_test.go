package workflows

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// corpus names the histories every path leaves; each must be recorded.
var corpus = []string{
	"worker_killed.json", "server_killed.json", "handed_back.json", "fork.json", "extended_canceled.json",
	"evaluation_retried.json", "run_continued.json", "benchmark_resumed.json",
	"benchmark_continued_as_new.json", "benchmark_ended.json", "curve_scored.json",
	// Lean runs (versionLeanRun): one marker, a shared scoring slot, local
	// activities.
	"lean_curve_scored.json", "lean_evaluation_retried.json", "lean_run_parked.json", "lean_worker_killed.json",
	"lean_run_continued.json", "anchor_measured.json",
	// Lean runs, version 2: the final evaluation scores the final
	// checkpoint's mark and gives the slot back.
	"lean2_curve_scored.json", "lean2_evaluation_retried.json", "lean2_run_parked.json", "lean2_worker_killed.json",
	"lean2_run_continued.json",
	// Lean runs, version 2, started with their labels
	// (RunSearchAttributes): no upsert of them in the first task.
	"labelled_curve_scored.json", "labelled_evaluation_retried.json", "labelled_run_parked.json", "labelled_worker_killed.json",
	"labelled_run_continued.json",
	// Lean runs, version 2, whose attempts return their final checkpoint
	// and ledger in their result (AgentInput.LastInResult).
	"final_in_result_curve_scored.json", "final_in_result_evaluation_retried.json", "final_in_result_run_parked.json",
	"final_in_result_worker_killed.json", "final_in_result_run_continued.json",
	// Lean runs, version 3: the slot is asked of the worker running the
	// run first, a local activity (slots.acquire).
	"lease_here_curve_scored.json", "lease_here_evaluation_retried.json", "lease_here_run_parked.json",
	"lease_here_worker_killed.json", "lease_here_run_continued.json",
}

// TestReplayRecordedHistories replays histories recorded from real runs
// on the embedded server, one per path a run or benchmark takes: a change
// that breaks determinism for running workflows fails here. Record them
// with `task record-histories` (docs/develop/versioning.md).
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range corpus {
		if !slices.Contains(files, filepath.Join("testdata", name)) {
			t.Errorf("the replay corpus has no %s", name)
		}
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			h, err := LoadHistory(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Replay(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReplayFailsOnAnotherCommand: a history whose commands the code
// would not reproduce (its first activity renamed) fails to replay, so
// the corpus test can fail.
func TestReplayFailsOnAnotherCommand(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "fork.json"))
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(b), `"name": "ResolveTask"`, `"name": "ResolveTaskV2"`, 1)
	if changed == string(b) {
		t.Fatal("fork.json schedules no ResolveTask")
	}
	f := filepath.Join(t.TempDir(), "changed.json")
	if err := os.WriteFile(f, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := LoadHistory(f)
	if err != nil {
		t.Fatal(err)
	}
	h.WorkflowID = "fork-1"
	if err := h.Replay(); err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
		t.Fatalf("replay of a history with another activity: %v, want a nondeterminism error", err)
	}
}
