package report

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/sandbox/observe"
	"github.com/mlrb/mlrb/internal/sandbox/observe/observetest"
	"github.com/mlrb/mlrb/internal/store/blob"
)

// TestResearchTimeline: a 24 h run's page draws its research on one
// agent-time axis, bounded whatever its size: experiments packed in at
// most researchLanes rows, one GPU point and one call tick per pixel
// column at most; its experiments table lists them with outcomes.
func TestResearchTimeline(t *testing.T) {
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o := observetest.Day()
	if err := observe.Put(context.Background(), store, o); err != nil {
		t.Fatal(err)
	}
	s := 0.6
	r := runs.Result{RunID: o.RunID, Task: "t", Agent: "a", Seed: 1, Outcome: runs.OutcomeLimitReached, Score: &s, TimeLimitS: 86400,
		Budget: budget.Account{LimitS: 86400, UsedS: 86400}, Curve: []runs.Mark{{AtS: 43200, Seq: 72, Score: &s, Split: contract.SplitDev}}}
	dir := t.TempDir()
	if err := Write(context.Background(), dir, Input{Title: "b", Results: []runs.Result{r}, Store: store, MinExperiment: time.Minute}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "runs", Key(r.RunID)+".html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	svg := page[strings.Index(page, `<svg xmlns="http://www.w3.org/2000/svg" class="research"`):]
	svg = svg[:strings.Index(svg, "</svg>")]
	if n := strings.Count(svg, `class="exp `); n != 200 {
		t.Fatalf("%d experiment bars, want 200", n)
	}
	if n := strings.Count(svg, `class="exp oom_killed"`); n != 16 {
		t.Fatalf("%d OOM-killed bars, want 16", n)
	}
	if !strings.Contains(svg, `class="exp cut_off"`) {
		t.Fatal("the experiment running at the deadline is not shown cut off")
	}
	h := regexp.MustCompile(`class="research" width="\d+" height="(\d+)"`).FindStringSubmatch(page)
	if h == nil || len(h[1]) > 3 {
		t.Fatalf("timeline height %v: want it bounded", h)
	}
	pts := regexp.MustCompile(`points="([^"]*)"`).FindStringSubmatch(svg)
	if pts == nil || len(strings.Fields(pts[1])) > 641 || strings.Count(svg, `class="call"`) > 641 {
		t.Fatalf("GPU line or call ticks not binned to pixels")
	}
	if strings.Count(page, `<tr class="oom_killed">`) != 16 || !strings.Contains(page, "python train.py --trial 0") {
		t.Fatal("the experiments table misses rows")
	}
}
