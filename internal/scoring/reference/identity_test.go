package reference

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/tasks"
)

// TestEvaluatorNamesAllTheScoringCode: every non-test file of the package
// but what the agents read of it (agentside.go, untrained.go: the models
// it builds score nothing) and this naming is embedded in the
// evaluator's name, so a scoring file added later changes it too.
func TestEvaluatorNamesAllTheScoringCode(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && f != "untrained.go" && f != "agentside.go" && f != "identity.go" {
			want = append(want, f)
		}
	}
	ents, err := fs.ReadDir(scoring, ".")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the evaluator's name covers %v; the scoring code is %v: add the new file to identity.go's go:embed", got, want)
	}
	if e := Evaluator(); !IsEvaluatorName(e) {
		t.Fatalf("Evaluator() = %q is not an evaluator's name", e)
	}
	for _, s := range []string{"", "builtin reference-eval sha256:", "builtin reference-eval sha256:" + strings.Repeat("g", 64),
		"process mlrb-agent sha256:" + strings.Repeat("a", 64), Evaluator() + "\nmore"} {
		if IsEvaluatorName(s) {
			t.Fatalf("%q taken as an evaluator's name", s)
		}
	}
}

// TestShippedAnchorsMeasuredByThisEvaluator: the mini suite's anchors
// name the evaluator this code is, so its leaderboards compare like with
// like. An edit to the scoring code fails here until they are measured
// again.
func TestShippedAnchorsMeasuredByThisEvaluator(t *testing.T) {
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range cat.IDs("mini") {
		s, _ := cat.Get(id)
		if s.Anchors == nil || s.Anchors.Baseline == nil || s.Anchors.Top == nil {
			t.Fatalf("%s ships no anchors", id)
		}
		for role, a := range map[string]*tasks.Anchor{"baseline": s.Anchors.Baseline, "top": s.Anchors.Top} {
			if a.Evaluator != Evaluator() {
				t.Errorf("%s's %s was measured by %s; the scoring code is now %s: measure it again "+
					"(`starter demo`, then `starter anchors measure %s --role baseline --agent noop --time-limit 30s --seeds 3 --yaml`, "+
					"and --role top --agent reference --time-limit 3m) and put it in tasks/catalog/%s.yaml", id, role, a.Evaluator, Evaluator(), id, id)
			}
		}
	}
}
