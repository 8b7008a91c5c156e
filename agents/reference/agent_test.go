package reference

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/scoring/lmeval"
	mini "github.com/mlrb/mlrb/internal/scoring/reference"
	"github.com/mlrb/mlrb/tasks"

	"github.com/mlrb/mlrb/internal/run/contract"
)

func noSleep(context.Context, time.Duration) error { return nil }

// babyLM is mini_baby_lm's spec and a first attempt's contract in a fresh
// workdir, an hour from its deadline.
func babyLM(t *testing.T, seed int64) (*tasks.Spec, contract.Env) {
	t.Helper()
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := cat.Get("mini_baby_lm")
	if err != nil {
		t.Fatal(err)
	}
	return spec, contract.Env{Task: spec.ID, Seed: seed, Workdir: t.TempDir(), Deadline: time.Now().Add(time.Hour), Attempt: 1}
}

// TestMiniSuite runs the agent and the evaluator on every mini task and
// two seeds: every task is solvable above chance and seeds differ.
func TestMiniSuite(t *testing.T) {
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range cat.IDs("mini") {
		spec, _ := cat.Get(id)
		t.Run(id, func(t *testing.T) {
			scores := map[uint64]float64{}
			for _, seed := range []uint64{1, 2} {
				dir := t.TempDir()
				env := contract.Env{Task: id, Seed: int64(seed), Workdir: dir, Deadline: time.Now().Add(time.Hour), Attempt: 1}
				a := &Agent{Spec: spec, Env: env, Sleep: noSleep}
				if err := a.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				res, err := mini.Evaluate(spec, seed, filepath.Join(dir, "output", "model"), contract.SplitTest)
				if err != nil {
					t.Fatal(err)
				}
				score, _, err := lmeval.Score(res, spec.Metric)
				if err != nil {
					t.Fatal(err)
				}
				chance := 0.5
				if spec.Metric.Parts[0].Task == "mlrb_mc4" {
					chance = 0.25
				}
				if spec.Reference.Kind == "translate" {
					chance = 0.1
				}
				if score <= chance+0.05 {
					t.Errorf("seed %d: score %.3f is not above chance %.2f", seed, score, chance)
				}
				scores[seed] = score
				t.Logf("seed %d: %s = %.4f", seed, spec.Metric.Name, score)
			}
			if scores[1] == scores[2] {
				t.Errorf("seeds 1 and 2 both scored %.4f", scores[1])
			}
		})
	}
}

// TestResumeContinuesTrials: a second start finds the first start's trials
// and only runs the rest.
func TestResumeContinuesTrials(t *testing.T) {
	spec, env := babyLM(t, 3)
	dir := env.Workdir
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	a := &Agent{Spec: spec, Env: env, Sleep: func(context.Context, time.Duration) error {
		n++
		if n == 5 {
			cancel()
			return context.Canceled
		}
		return nil
	}}
	if err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
	done, _ := loadTrials(filepath.Join(dir, "trials"))
	if len(done) != 5 {
		t.Fatalf("after a stop, %d trials on disk, want 5", len(done))
	}
	env.Attempt, env.Resumed = 2, true
	b := &Agent{Spec: spec, Env: env, Sleep: noSleep}
	if err := b.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	done, _ = loadTrials(filepath.Join(dir, "trials"))
	if len(done) != spec.Reference.Trials || done[4].Attempt != 1 || done[5].Attempt != 2 {
		t.Fatalf("trials after resume: %d, attempts %d/%d", len(done), done[4].Attempt, done[5].Attempt)
	}
}

// TestIdleHoldsItsBudget: the idle agent submits at once and returns only
// when its context ends (the soft deadline's SIGTERM).
func TestIdleHoldsItsBudget(t *testing.T) {
	spec, env := babyLM(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Idle(ctx, spec, env) }()
	sub := filepath.Join(env.OutputDir(), contract.SubmissionFile)
	for !exists(sub) {
		select {
		case err := <-done:
			t.Fatalf("idle returned before its deadline: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	// A correct agent never returns here; a broken one would, at once.
	select {
	case err := <-done:
		t.Fatalf("idle returned after submitting, before its deadline: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	res, err := mini.Evaluate(spec, 1, filepath.Join(env.OutputDir(), "model"), contract.SplitTest)
	if err != nil || len(res.Results) == 0 {
		t.Fatalf("its submission does not evaluate: %+v %v", res, err)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
