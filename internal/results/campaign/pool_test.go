package campaign

import (
	"errors"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/results/leaderboard"
	"github.com/mlrb/mlrb/internal/run/runs"
)

func run(bench, agent string, seed int64, spec string, score float64) runs.Result {
	return runs.Result{RunID: bench + "/" + agent + "/t/s", Task: "t", Agent: agent, Seed: seed, Outcome: runs.OutcomeScored, Score: &score,
		SpecHash: spec, EvaluatorImage: "sha256:eval", AgentDef: &runs.AgentRef{Name: agent, Hash: "sha256:" + agent, Image: "sha256:img-" + agent}}
}

// TestPoolsOneExperiment: two benchmarks of the same task spec, evaluator
// and agents pool into one population of six runs per agent.
func TestPoolsOneExperiment(t *testing.T) {
	b1 := Set{ID: "b1", Results: []runs.Result{run("b1", "a", 1, "sha256:s", 0.5), run("b1", "a", 2, "sha256:s", 0.6)},
		Setup: leaderboard.Setup{Tasks: map[string]leaderboard.TaskSetup{"t": {TimeLimitS: 30, Hardware: "CPU"}}}}
	b2 := Set{ID: "b2", Results: []runs.Result{run("b2", "a", 3, "sha256:s", 0.7), run("b2", "c", 1, "sha256:s", 0.2)}}
	p, err := Pool([]Set{b1, b2}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Results) != 4 || len(p.Conflicts) != 0 || p.Results[2].Benchmark != "b2" || p.Setup.Tasks["t"].Hardware != "CPU" {
		t.Fatalf("pooled %+v", p)
	}
	rows := leaderboard.Summarise(leaderboard.RunsOf(p.Results), nil)
	if len(rows) != 2 || rows[0].Runs != 3 {
		t.Fatalf("rows %+v", rows)
	}
}

// TestRefusesAMixedPool: a task spec that changed between two benchmarks
// makes their runs two experiments: refused naming the task, agent,
// field and benchmarks; allowed, each variant is shown apart. The same
// within one benchmark is a warning, never a refusal.
func TestRefusesAMixedPool(t *testing.T) {
	b1 := Set{ID: "b1", Results: []runs.Result{run("b1", "a", 1, "sha256:aaaaaaaaaaaaaaaaaaaa", 0.5)}}
	b2 := Set{ID: "b2", Results: []runs.Result{run("b2", "a", 1, "sha256:bbbbbbbbbbbbbbbbbbbb", 0.7)}}
	_, err := Pool([]Set{b1, b2}, false)
	var ce *ConflictError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "task t, agent a: the task spec hash differs (sha256:aaaaaaaaaaaa in b1; sha256:bbbbbbbbbbbb in b2)") ||
		!strings.Contains(err.Error(), "--allow-mixed") {
		t.Fatalf("err = %v", err)
	}
	p, err := Pool([]Set{b1, b2}, true)
	if err != nil || p.Results[0].Agent != "a [b1]" || p.Results[1].Agent != "a [b2]" || len(p.Conflicts) != 1 {
		t.Fatalf("mixed pool %+v, %v", p, err)
	}
	one := Set{ID: "b1", Results: append(b1.Results, b2.Results...)}
	if p, err := Pool([]Set{one}, false); err != nil || len(p.Conflicts) != 1 || p.Results[0].Agent != "a" {
		t.Fatalf("one benchmark: %+v, %v", p, err)
	}
	// A run without an evaluator (an infra failure) agrees with any.
	failed := run("b2", "a", 2, "sha256:aaaaaaaaaaaaaaaaaaaa", 0)
	failed.EvaluatorImage, failed.Score, failed.Outcome = "", nil, runs.OutcomeInfraFailed
	if _, err := Pool([]Set{b1, {ID: "b2", Results: []runs.Result{failed}}}, false); err != nil {
		t.Fatal(err)
	}
}

// TestRefusesAnotherBudget: a benchmark run with --time-limit 12s and one
// with the task's 30s are two experiments, whatever their spec hash; two
// policies are named in a warning.
func TestRefusesAnotherBudget(t *testing.T) {
	short, long := run("b1", "a", 1, "sha256:s", 0.5), run("b2", "a", 1, "sha256:s", 0.7)
	short.TimeLimitS, long.TimeLimitS = 12, 30
	b1 := Set{ID: "b1", Results: []runs.Result{short}, Setup: leaderboard.Setup{Policy: leaderboard.Policy{CheckpointInterval: "3s"}}}
	b2 := Set{ID: "b2", Results: []runs.Result{long}, Setup: leaderboard.Setup{Policy: leaderboard.Policy{CheckpointInterval: "10m0s"}}}
	if _, err := Pool([]Set{b1, b2}, false); err == nil || !strings.Contains(err.Error(), "the time limit differs (12s in b1; 30s in b2)") {
		t.Fatalf("err = %v", err)
	}
	long.TimeLimitS = 12
	p, err := Pool([]Set{b1, {ID: "b2", Results: []runs.Result{long}, Setup: b2.Setup}}, false)
	if err != nil || len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "benchmark b2 ran under another policy") || p.Setup.Policy.CheckpointInterval != "3s" {
		t.Fatalf("pool %+v, %v", p, err)
	}
}
