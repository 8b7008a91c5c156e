package evaluation

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/fleet/gpu"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

// TestNearestCheckpoints: each mark takes the checkpoint nearest to it in
// agent time (the earlier on a tie); one after the mark only within the
// slack; none at all is "no checkpoint yet", never a 0.
func TestNearestCheckpoints(t *testing.T) {
	var own []*checkpoint.Manifest
	for i, s := range []float64{600, 1200, 3700, 7000, 14400} {
		own = append(own, &checkpoint.Manifest{Seq: i + 1, AgentSeconds: s})
	}
	// Marks: 5 min (only #1 at 10 min, past the slack), 1 h (#3, 100 s
	// late, within the slack), 1.5 h (#4 is nearer, but past the slack:
	// #3), 2 h (#4), 8 h (#5).
	got := nearest(own, []float64{300, 3600, 5400, 7200, 28800}, 200)
	want := []int{0, 3, 3, 4, 5}
	for i, m := range got {
		if m.Seq != want[i] {
			t.Fatalf("mark %v: checkpoint #%d, want #%d", m.AtS, m.Seq, want[i])
		}
	}
	if got[0].NoModel == "" || got[0].Score != nil || got[1].AgentS != 3700 {
		t.Fatalf("marks %+v", got)
	}
	if tie := nearest(own, []float64{900}, 600); tie[0].Seq != 1 {
		t.Fatalf("a tie takes #%d, want the earlier #1", tie[0].Seq)
	}
}

// TestFinalEvaluationAlsoScoresItsMark: the final evaluation runs the
// curve command on the model it restored, keeps that evaluation's log and
// results under the mark's name, and gives the lease back when asked; a
// curve command that fails is reported, the lease kept for the mark's
// own evaluation.
func TestFinalEvaluationAlsoScoresItsMark(t *testing.T) {
	for _, c := range []struct {
		name, dev string
		wantErr   bool
	}{
		{name: "scored", dev: `{"results":{"blimp":{"acc,none":0.5}},"configs":{},"versions":{}}`},
		{name: "dev split missing", dev: "", wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newControlRig(t)
			write := "exit 4"
			if c.dev != "" {
				write = "echo '" + c.dev + "' > {results}"
			}
			r.task.Evaluation.Curve = &tasks.Curve{Command: []string{"/bin/sh", "-c", write}}
			pool, err := gpu.NewPool(gpu.Options{Slots: 1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Acquire("run#eval", "run/1", 0); err != nil {
				t.Fatal(err)
			}
			r.a.Host.GPUs = pool
			ref := r.checkpointModel(t, "run", "fine")
			v, err := r.env.ExecuteActivity(r.a.Evaluate, activities.EvalInput{RunID: "run", Task: r.task, Final: ref, N: 1, AlsoMark: true, Release: true,
				Lease: &activities.Lease{Token: "run#eval"}})
			if err != nil {
				t.Fatal(err)
			}
			var res activities.EvalResult
			if err := v.Get(&res); err != nil {
				t.Fatal(err)
			}
			if res.Score != 0.75 || res.Mark == nil || (res.Mark.Error != "") != c.wantErr || res.Released == c.wantErr {
				t.Fatalf("result %+v, mark %+v", res, res.Mark)
			}
			if held := len(pool.Leases()); held != map[bool]int{false: 0, true: 1}[c.wantErr] {
				t.Fatalf("%d leases held after the evaluation", held)
			}
			if c.wantErr {
				return
			}
			if res.Mark.Score != 0.5 {
				t.Fatalf("mark score %v, want the dev split's 0.5", res.Mark.Score)
			}
			keys, err := r.a.Runs.Engine.Store.List(context.Background(), blob.RunPrefix("run")+"evaluations/mark-1-try-1/")
			if err != nil || len(keys) != 2 {
				t.Fatalf("the mark's evaluation keeps %v (%v), want its log and results", keys, err)
			}
			for _, o := range keys {
				if !strings.HasSuffix(o.Key, ".json") {
					continue
				}
				rc, err := r.a.Runs.Engine.Store.Get(context.Background(), o.Key)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(rc)
				_ = rc.Close()
				if !strings.Contains(string(b), "0.5") {
					t.Fatalf("kept results %s", b)
				}
			}
		})
	}
}

// TestBothSplitsInOneRun: with the curve's dev_args, the final
// evaluation's run of evaluation.command scores the dev split too (the
// curve's own command never runs) and keeps its results under the mark's
// name; when that run fails, the test split and the mark are each run
// alone, as without it, and both still score.
func TestBothSplitsInOneRun(t *testing.T) {
	test := `{"results":{"blimp":{"acc,none":0.75}},"configs":{},"versions":{}}`
	dev := `{"results":{"blimp":{"acc,none":0.5}},"configs":{},"versions":{}}`
	for _, c := range []struct {
		name      string
		both      string // what the run of both does with the dev split's file, "$1"
		wantRuns  string // the evaluator runs, in order: b (both), t (test alone), d (dev alone)
		wantStore int    // what the mark's evaluation keeps: its results (and its own log if run alone)
	}{
		{name: "one run", both: "echo '" + dev + "' > \"$1\"", wantRuns: "b", wantStore: 1},
		{name: "the run of both fails", both: "exit 5", wantRuns: "btd", wantStore: 2},
		{name: "its dev results are unreadable", both: "echo 'not json' > \"$1\"", wantRuns: "bd", wantStore: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newControlRig(t)
			runs := filepath.Join(t.TempDir(), "runs")
			// dev_args arrive as $0 and $1 of sh -c.
			r.task.Evaluation.Command = []string{"/bin/sh", "-c", `if [ "$0" = --dev ]; then printf b >> ` + runs + ` && ` + c.both +
				`; else printf t >> ` + runs + `; fi && echo '` + test + `' > {results}`}
			r.task.Evaluation.Curve = &tasks.Curve{Command: []string{"/bin/sh", "-c", "printf d >> " + runs + " && echo '" + dev + "' > {results}"},
				DevArgs: []string{"--dev", "{dev_results}"}}
			ref := r.checkpointModel(t, "run", "fine")
			in := activities.EvalInput{RunID: "run", Task: r.task, Final: ref, N: 1, AlsoMark: true}
			v, err := r.env.ExecuteActivity(r.a.Evaluate, in)
			if err != nil {
				t.Fatal(err)
			}
			var res activities.EvalResult
			if err := v.Get(&res); err != nil {
				t.Fatal(err)
			}
			if res.Score != 0.75 || res.Mark == nil || res.Mark.Error != "" || res.Mark.Score != 0.5 {
				t.Fatalf("result %+v, mark %+v: want 0.75 on the test split, 0.5 on the dev split", res, res.Mark)
			}
			if got, _ := os.ReadFile(runs); string(got) != c.wantRuns {
				t.Fatalf("evaluator runs %q, want %q", got, c.wantRuns)
			}
			// The workflow sizes the activity's timeout and lease by this.
			if len(c.wantRuns) > in.EvaluatorRuns() {
				t.Fatalf("%d evaluator runs, but EvaluatorRuns says at most %d", len(c.wantRuns), in.EvaluatorRuns())
			}
			keys, err := r.a.Runs.Engine.Store.List(context.Background(), blob.RunPrefix("run")+"evaluations/mark-1-try-1/")
			if err != nil || len(keys) != c.wantStore {
				t.Fatalf("the mark's evaluation keeps %v (%v), want %d objects", keys, err, c.wantStore)
			}
		})
	}
}
