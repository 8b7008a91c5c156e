package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/fleet/gpu"
	"github.com/mlrb/mlrb/internal/fleet/hosts"
	"github.com/mlrb/mlrb/internal/results/board"
	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// TestPrintResultAsJSON: --json prints the result whole.
func TestPrintResultAsJSON(t *testing.T) {
	score := 0.5
	var b bytes.Buffer
	if err := printResult(&b, &runs.Result{RunID: "r", Score: &score}, true); err != nil || !strings.Contains(b.String(), `"score": 0.5`) {
		t.Fatalf("json: %v %s", err, b.String())
	}
}

func TestWriteCheckpointsNamesZombies(t *testing.T) {
	ms := []*checkpoint.Manifest{{Seq: 1, Attempt: 1, Bytes: 10}, {Seq: 2, Attempt: 1, SupersededBy: 2, Unsettled: []string{"w.bin"}}}
	var b bytes.Buffer
	if err := writeCheckpoints(&b, ms); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "zombie: superseded by 2") || !strings.Contains(got, "w.bin") {
		t.Fatalf("checkpoints:\n%s", got)
	}
}

func TestHostViews(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := []hosts.Record{
		{ID: "up", Slots: 2, Leases: []gpu.Lease{{Token: "r#1", Devices: []int{0}, Since: now.Add(-time.Minute), Renewed: now}}, SeenAt: now.Add(-10 * time.Second), StartedAt: now.Add(-time.Hour)},
		{ID: "silent", Slots: 1, SeenAt: now.Add(-2 * silentAfter)},
		{ID: "stopped", Slots: 1, Stopped: true, SeenAt: now},
	}
	vs := hostViews(recs, now)
	if vs[0].State != "up" || vs[0].InUse != 1 || vs[0].Free != 1 || vs[1].State != "silent" || vs[2].State != "stopped" || vs[2].Free != 0 {
		t.Fatalf("views %+v", vs)
	}
	var b bytes.Buffer
	if err := writeHosts(&b, vs, now); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.Contains(got, "r#1 [0] 1m0s ago, 0s ago") {
		t.Fatalf("hosts:\n%s", got)
	}
}

// TestLeaderboardRowsCountCutOffRuns: once a benchmark has ended, a run
// without a stored result counts as an infra failure (invalid, never 0);
// while it runs, it is left out.
func TestLeaderboardRowsCountCutOffRuns(t *testing.T) {
	all := runresults.Matrix{BenchmarkID: "b", Agents: []string{"a"}, Tasks: []string{"t"}, Seeds: []int64{1, 2}}.Runs()
	score := 1.0
	got := []*runs.Result{{RunID: all[0].ID, Task: "t", Agent: "a", Seed: 1, Outcome: runs.OutcomeScored, Score: &score}, nil}
	if rows := board.Rows("b", all, got, false); len(rows) != 1 {
		t.Fatalf("running: %d rows", len(rows))
	}
	rows := board.Rows("b", all, got, true)
	if len(rows) != 2 || rows[1].Outcome != runs.OutcomeInfraFailed || !strings.Contains(rows[1].Reason, "starter benchmark resume b") {
		t.Fatalf("ended: %+v", rows)
	}
	var b bytes.Buffer
	if err := printLeaderboard(&b, "b", rows, leaderboard.Setup{}, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "1 runs without a score") || !strings.Contains(b.String(), " 1/0/1 ") {
		t.Fatalf("leaderboard:\n%s", b.String())
	}
}

func TestAbbreviate(t *testing.T) {
	if got := abbreviate([]string{"a", "b", "c"}, 2); got != "a, b and 1 more" {
		t.Fatal(got)
	}
	if got := abbreviate([]string{"a"}, 2); got != "a" {
		t.Fatal(got)
	}
}
