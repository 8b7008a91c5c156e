package lmeval

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/tasks"
)

// pinned is what the pinned lm-eval version defines (testdata, read from
// that version's task configs).
type pinned struct {
	Version string `json:"version"`
	Names   map[string]struct {
		Kind  string   `json:"kind"`
		Tasks []string `json:"tasks"`
	} `json:"names"`
	Metrics map[string][]string `json:"metrics"`
}

// TestCatalogMatchesThePinnedLMEval: every lm-eval task of the catalog
// runs on the evaluator image of the pinned version, selects a name that
// version defines, and reads each metric part from a task that name runs,
// under a metric that task reports ("<metric>,none").
func TestCatalogMatchesThePinnedLMEval(t *testing.T) {
	b, err := os.ReadFile("testdata/lm-eval-0.4.12-tasks.json")
	if err != nil {
		t.Fatal(err)
	}
	var p pinned
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile("../../../deploy/evaluator.Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), `"lm_eval[hf]==`+p.Version+`"`) {
		t.Fatalf("deploy/evaluator.Dockerfile does not pin lm_eval %s", p.Version)
	}
	smoke, err := os.ReadFile("../../../deploy/lmeval/mlrb-lmeval-smoke")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, id := range cat.IDs("full") {
		s, _ := cat.Get(id)
		cmd := s.Evaluation.Command
		if len(cmd) == 0 || cmd[0] != "mlrb-eval-lmeval" {
			continue
		}
		checked++
		if want := "mlrb-evaluator:lm-eval-" + p.Version; s.Evaluation.Image != want {
			t.Errorf("%s: evaluator image %q, want %q", id, s.Evaluation.Image, want)
		}
		i := slices.Index(cmd, "--tasks")
		if i < 0 || i+1 >= len(cmd) {
			t.Errorf("%s: no --tasks in %v", id, cmd)
			continue
		}
		name, ok := p.Names[cmd[i+1]]
		if !ok {
			t.Errorf("%s: lm-eval %s defines no task, group or tag %q", id, p.Version, cmd[i+1])
			continue
		}
		for _, part := range s.Metric.Parts {
			metric, filter, _ := strings.Cut(part.Field, ",")
			if !slices.Contains(name.Tasks, part.Task) || !slices.Contains(p.Metrics[part.Task], metric) || filter != "none" {
				t.Errorf("%s: part %s/%s: %q runs %v; %s reports %v", id, part.Task, part.Field, cmd[i+1], name.Tasks, part.Task, p.Metrics[part.Task])
			}
			if !strings.Contains(string(smoke), `("`+part.Task+`", "`+part.Field+`")`) {
				t.Errorf("%s: the image's smoke evaluation does not check %s/%s", id, part.Task, part.Field)
			}
		}
	}
	if checked != 6 {
		t.Fatalf("checked %d lm-eval tasks; the full suite has 6", checked)
	}
}
