package resume

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/results/runresults"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
)

// fakeSource answers from maps and counts its calls.
type fakeSource struct {
	listed  map[string]Listed
	results map[string]*runs.Result
	reached map[string]Reached
	lists   int
	prefix  string
	asked   []string
}

func (f *fakeSource) List(_ context.Context, prefix string) (map[string]Listed, error) {
	f.lists++
	f.prefix = prefix
	return f.listed, nil
}

func (f *fakeSource) Results(_ context.Context, ids []string) (map[string]*runs.Result, error) {
	f.asked = append(f.asked, ids...)
	out := map[string]*runs.Result{}
	for _, id := range ids {
		out[id] = f.results[id]
	}
	return out, nil
}

func (f *fakeSource) Reached(_ context.Context, id string, _ time.Time) (Reached, error) {
	st, ok := f.reached[id]
	if !ok {
		return st, errors.New("no such run")
	}
	return st, nil
}

func TestMakeSortsEveryKindOfRun(t *testing.T) {
	m := runresults.Matrix{BenchmarkID: "b", Agents: []string{"a"}, Tasks: []string{"t"}, Seeds: []int64{1, 2, 3, 4, 5, 6, 7}}
	children := m.Runs()
	id := func(i int) string { return children[i].ID }
	closed := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	src := &fakeSource{
		listed: map[string]Listed{
			id(0): {ID: id(0), State: Completed},
			id(1): {ID: id(1), State: Completed},
			id(2): {ID: id(2), State: Running},
			id(3): {ID: id(3), State: Cut, Close: closed},
			id(4): {ID: id(4), State: Cut, Close: closed},
			// id(5) never started; id(6) too
		},
		results: map[string]*runs.Result{
			id(0): {RunID: id(0), Outcome: runs.OutcomeScored},
			id(1): {RunID: id(1), Outcome: runs.OutcomeInfraFailed, Budget: budget.Account{LimitS: 100, UsedS: 40, LostS: 7, InfraWaitS: 3, ExtendedS: 10}},
		},
		reached: map[string]Reached{
			// 20 s used at the last checkpoint, 50 s reached when it
			// closed: 30 s of them lost.
			id(3): {AgentS: 50, Budget: budget.Account{LimitS: 100, UsedS: 20, LostS: 2}},
		},
	}
	p, err := Make(context.Background(), src, "b", children)
	if err != nil {
		t.Fatal(err)
	}
	if src.lists != 1 || src.prefix != "b/" {
		t.Fatalf("listed %d times, prefix %q: one visibility query for the benchmark's runs", src.lists, src.prefix)
	}
	if strings.Join(src.asked, ",") != id(0)+","+id(1) {
		t.Fatalf("results asked of %v: only the completed runs", src.asked)
	}
	if _, ok := p.Kept[id(0)]; !ok || len(p.Kept) != 1 {
		t.Fatalf("kept %v", p.Kept)
	}
	if want := []string{id(1), id(3), id(4), id(5), id(6)}; strings.Join(p.Again, ",") != strings.Join(want, ",") {
		t.Fatalf("again %v, want %v", p.Again, want)
	}
	if strings.Join(p.Busy, ",") != id(2) {
		t.Fatalf("busy %v", p.Busy)
	}
	if c := p.Carried[id(1)]; c.LostS != 7 || c.InfraWaitS != 3 || c.ExtendedS != 10 || c.UsedS != 0 {
		t.Fatalf("carried of an infra-failed run: %+v", c)
	}
	if c := p.Carried[id(3)]; c.LostS != 2+30 {
		t.Fatalf("carried of a terminated run: %+v (lost 2 before, 30 s past its last checkpoint)", c)
	}
	if _, ok := p.Uncarried[id(4)]; !ok || len(p.Uncarried) != 1 {
		t.Fatalf("uncarried %v: the run whose status cannot be read", p.Uncarried)
	}
	e := p.Entries()
	if e[id(0)].Outcome != string(runs.OutcomeScored) || e[id(1)].Carried == nil || e[id(3)].Carried == nil {
		t.Fatalf("entries %+v", e)
	}
	if _, ok := e[id(5)]; ok {
		t.Fatal("a never-started run needs no entry: it starts afresh")
	}
}

func TestMakeRefusesACompletedRunWithoutResult(t *testing.T) {
	children := runresults.Matrix{BenchmarkID: "b", Agents: []string{"a"}, Tasks: []string{"t"}, Seeds: []int64{1}}.Runs()
	src := &fakeSource{listed: map[string]Listed{children[0].ID: {ID: children[0].ID, State: Completed}}}
	if _, err := Make(context.Background(), src, "b", children); err == nil || !strings.Contains(err.Error(), children[0].ID) {
		t.Fatalf("err = %v, want one naming the run", err)
	}
}
