package workflows

import (
	"path/filepath"
	"slices"
	"testing"
)

// corpus names the histories every path leaves; each must be recorded.
var corpus = []string{
	"worker_killed.json", "server_killed.json", "handed_back.json", "fork.json", "extended_canceled.json",
	"evaluation_retried.json", "run_continued.json", "benchmark_resumed.json",
	"benchmark_continued_as_new.json", "benchmark_ended.json",
}

// TestReplayRecordedHistories replays histories recorded from real runs
// on the embedded server, one per path a run or benchmark takes: a change
// that breaks determinism for running workflows fails here. Record them
// with `task record-histories` (README: Changing workflow code under
// live runs).
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
			if err := ReplayHistoryFile(f); err != nil {
				t.Fatal(err)
			}
		})
	}
}
