package anchors

import (
	"context"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/tasks"
)

// TestAMeasurementWinsOverTheCatalog: a stored anchor replaces the
// catalog's of its role only; the leaderboard gets a task's anchors only
// when it has both, each named by its source.
func TestAMeasurementWinsOverTheCatalog(t *testing.T) {
	ctx := context.Background()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Get("mini_baby_lm")
	top := tasks.Anchor{Score: 0.95, RunID: "r-top", Agent: "reference", Evaluator: "sha256:e"}
	if err := Put(ctx, store, spec.ID, Top, top); err != nil {
		t.Fatal(err)
	}
	a, err := Of(ctx, store, spec)
	if err != nil {
		t.Fatal(err)
	}
	if a.Top.Score != 0.95 || a.Baseline.Score != spec.Anchors.Baseline.Score {
		t.Fatalf("anchors %+v %+v: the stored top, the catalog's baseline", a.Baseline, a.Top)
	}
	lb, err := ForLeaderboard(ctx, store, cat, []string{"mini_baby_lm", "mini_baby_lm", "no_such_task"})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := lb["mini_baby_lm"]
	if len(lb) != 1 || !ok || got.Top != 0.95 || !strings.Contains(got.Source, "top run r-top, agent reference, evaluator sha256:e") {
		t.Fatalf("leaderboard anchors %+v", lb)
	}
}

// TestAnAnchorNamesItsSource: an anchor with neither a run and evaluator
// nor a citation, or under another role, is refused.
func TestAnAnchorNamesItsSource(t *testing.T) {
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := Put(ctx, store, "t", Top, tasks.Anchor{Score: 1, RunID: "r"}); err == nil || !strings.Contains(err.Error(), "its source") {
		t.Fatalf("an anchor without its evaluator: %v", err)
	}
	if err := Put(ctx, store, "t", "best", tasks.Anchor{Score: 1, Citation: "a paper"}); err == nil {
		t.Fatal("a role that is neither baseline nor top")
	}
	if err := Put(ctx, store, "t", Baseline, tasks.Anchor{Score: 1, Citation: "a paper"}); err != nil {
		t.Fatalf("a cited anchor: %v", err)
	}
	if a, err := Get(ctx, store, "t", Baseline); err != nil || a.Citation != "a paper" {
		t.Fatalf("get: %+v, %v", a, err)
	}
	if a, err := Get(ctx, store, "t", Top); err != nil || a != nil {
		t.Fatalf("none stored: %+v, %v", a, err)
	}
}
