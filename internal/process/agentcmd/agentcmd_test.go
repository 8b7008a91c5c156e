package agentcmd

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/scoring/lmeval"
	"github.com/mlrb/mlrb/internal/scoring/reference"
	"github.com/mlrb/mlrb/tasks"
)

// The two splits scored at once land each in its own file, each as the
// split scored alone: the curve's mark reads the dev file, the score the
// test one.
func TestEvaluateBothSplits(t *testing.T) {
	c, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range c.IDs("mini") {
		spec, err := c.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		model := filepath.Join(dir, "model")
		if err := reference.Untrained(spec, model); err != nil {
			t.Fatal(err)
		}
		test, dev := filepath.Join(dir, "test.json"), filepath.Join(dir, "dev.json")
		if err := evaluate(spec, 7, model, contract.SplitTest, "", test, dev); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		for file, split := range map[string]string{test: contract.SplitTest, dev: contract.SplitDev} {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := lmeval.Parse(b, file)
			if err != nil {
				t.Fatal(err)
			}
			want, err := reference.Evaluate(spec, 7, model, split)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Results, roundTrip(t, want).Results) {
				t.Errorf("%s %s: %v, scored alone %v", id, split, got.Results, want.Results)
			}
		}
	}
}

// roundTrip is r as a reader of its file sees it.
func roundTrip(t *testing.T, r *lmeval.Results) *lmeval.Results {
	p := filepath.Join(t.TempDir(), "r.json")
	if err := lmeval.WriteFile(p, r, time.Now()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := lmeval.Parse(b, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
