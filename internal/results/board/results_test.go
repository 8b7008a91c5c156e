package board

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// memory is a Source that answers from maps and counts what it is asked.
type memory struct {
	bench     Benchmark
	stored    map[string]*runs.Result
	completed map[string]*runs.Result
	asked     []string
}

func (m *memory) Benchmark(_ context.Context, id string) (*Benchmark, error) {
	if id != m.bench.ID {
		return nil, errors.New(id + " is a run, not a benchmark")
	}
	b := m.bench
	return &b, nil
}

func (m *memory) Stored(_ context.Context, rs []runresults.Child) ([]*runs.Result, error) {
	out := make([]*runs.Result, len(rs))
	for i, r := range rs {
		out[i] = m.stored[r.ID]
	}
	return out, nil
}

func (m *memory) Completed(_ context.Context, r runresults.Child) (*runs.Result, error) {
	m.asked = append(m.asked, r.ID)
	return m.completed[r.ID], nil
}

func scored(r runresults.Child, s float64) *runs.Result {
	return &runs.Result{RunID: r.ID, Task: r.Task, Agent: r.Agent, Seed: r.Seed, Outcome: runs.OutcomeScored, Score: &s}
}

// TestBoardOfAnEndedBenchmark: every run is a row: stored results, the
// result of a run that completed without one stored (asked only for the
// runs missing one), and the runs cut off as infra failures.
func TestBoardOfAnEndedBenchmark(t *testing.T) {
	all := runresults.Matrix{BenchmarkID: "b", Agents: []string{"a"}, Tasks: []string{"t"}, Seeds: []int64{1, 2, 3}}.Runs()
	src := &memory{bench: Benchmark{ID: "b", Runs: all, Setup: leaderboard.Setup{Policy: leaderboard.Policy{MaxInfraAttempts: 3}}},
		stored: map[string]*runs.Result{all[0].ID: scored(all[0], 0.5)}, completed: map[string]*runs.Result{all[1].ID: scored(all[1], 0.7)}}
	b, err := Of(context.Background(), src, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Runs) != 3 || *b.Runs[1].Score != 0.7 || b.Runs[2].Outcome != runs.OutcomeInfraFailed || !strings.Contains(b.Runs[2].Reason, "starter benchmark resume b") {
		t.Fatalf("rows %+v", b.Runs)
	}
	if strings.Join(src.asked, ",") != all[1].ID+","+all[2].ID || b.Setup.Policy.MaxInfraAttempts != 3 || b.Partial != nil {
		t.Fatalf("asked %v, setup %+v, partial %v", src.asked, b.Setup, b.Partial)
	}
	if _, err := Of(context.Background(), src, "b/a/t/s1"); err == nil || !strings.Contains(err.Error(), "not a benchmark") {
		t.Fatalf("a run's id: %v", err)
	}
}

// TestBoardOfARunningBenchmark: so far, the runs that stored a result
// and those waiting for a retry; the runs under way are left out (never
// cut off), and the board says it is partial.
func TestBoardOfARunningBenchmark(t *testing.T) {
	all := runresults.Matrix{BenchmarkID: "b", Agents: []string{"a"}, Tasks: []string{"t"}, Seeds: []int64{1, 2, 3}}.Runs()
	waiting := runs.Result{RunID: all[2].ID, Task: "t", Agent: "a", Seed: 3, Outcome: "awaiting_eval_retry"}
	src := &memory{bench: Benchmark{ID: "b", Running: true, Done: 1, Total: 3, Runs: all, Waiting: []runs.Result{waiting}},
		stored: map[string]*runs.Result{all[0].ID: scored(all[0], 0.5)}}
	b, err := Of(context.Background(), src, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Runs) != 2 || b.Runs[1].RunID != all[2].ID || len(src.asked) != 0 || len(b.Partial) != 1 || !strings.Contains(b.Partial[0], "1 of 3 runs done") {
		t.Fatalf("board %+v, asked %v", b, src.asked)
	}
}

// TestBoardCarriedByAnOldBenchmark: a benchmark from before stored
// results shows the results it carried, and reads no store.
func TestBoardCarriedByAnOldBenchmark(t *testing.T) {
	r := runs.Result{RunID: "old/a/t/s1", Outcome: runs.OutcomeScored}
	b, err := Of(context.Background(), &memory{bench: Benchmark{ID: "old", Carried: []runs.Result{r}}}, "old")
	if err != nil || len(b.Runs) != 1 || b.Runs[0].RunID != r.RunID {
		t.Fatalf("board %+v, %v", b, err)
	}
}
