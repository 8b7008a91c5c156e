package runresults

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/results/review"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
)

func TestPutGetAll(t *testing.T) {
	ctx := context.Background()
	s, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	runs := Matrix{BenchmarkID: "b", Agents: []string{"a"}, Tasks: []string{"t"}, Seeds: []int64{1, 2, 3}}.Runs()
	if len(runs) != 3 || runs[2] != (Child{"a", "t", 3, "b/a/t/s3"}) {
		t.Fatalf("runs = %+v", runs)
	}
	for _, id := range []string{"b/a/t/s1", "b/a/t/s2"} {
		if err := Put(ctx, s, id, []byte(`{"run_id":"`+id+`","outcome":"scored"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := Put(ctx, s, "x", []byte("{not json")); err == nil {
		t.Fatal("a result that is not JSON was stored")
	}
	type res struct {
		RunID   string `json:"run_id"`
		Outcome string `json:"outcome"`
	}
	calls := 0
	got, err := GetAll[res](ctx, s, runs, func(int) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].RunID != "b/a/t/s1" || got[1].Outcome != "scored" || got[2] != nil || calls != 3 {
		t.Fatalf("got %v, %d calls", got, calls)
	}
	if runs[0].Pair() != "t/a" {
		t.Errorf("pair = %q", runs[0].Pair())
	}
	// A stored result that is not one fails the read, naming the run.
	if err := Put(ctx, s, "b/a/t/s3", []byte(`[1]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := GetAll[res](ctx, s, runs, nil); err == nil || !strings.Contains(err.Error(), "decode result of b/a/t/s3") {
		t.Fatalf("a result that is not one: %v", err)
	}
}

// TestStored: a benchmark's stored runs are listed from the store alone,
// not another benchmark's whose id it prefixes, nor a run with no result.
func TestStored(t *testing.T) {
	ctx := context.Background()
	s, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b/a/t/s1", "b/a/t/s2", "b2/a/t/s1", "b"} {
		if err := Put(ctx, s, id, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, blob.RunPrefix("b/a/t/s3")+"logs/x", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	ids, err := Stored(ctx, s, "b")
	if err != nil || strings.Join(ids, ",") != "b/a/t/s1,b/a/t/s2" {
		t.Fatalf("stored runs of b: %v %v", ids, err)
	}
}

// failingList is a store whose listing fails: verdicts cannot be read.
type failingList struct{ blob.Store }

func (failingList) List(context.Context, string) ([]blob.Object, error) {
	return nil, errors.New("store unavailable")
}

// TestVerdictsAreNeverLost (audit L6): a result stored again without the
// run's verdict (a concurrent store as the verdict was given) is read
// with it; and a verdict that cannot be read fails the completion of a
// result, never stores it as if the run had none.
func TestVerdictsAreNeverLost(t *testing.T) {
	ctx := context.Background()
	s, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id := "b/a/t/s1"
	if err := review.Put(ctx, s, id, &runs.Verdict{Verdict: runs.VerdictHacked, By: "rev", At: time.Now().UTC(), Note: "copied"}); err != nil {
		t.Fatal(err)
	}
	if err := Put(ctx, s, id, []byte(`{"run_id":"`+id+`","outcome":"scored","score":0.9}`)); err != nil {
		t.Fatal(err)
	}
	got, err := GetAll[runs.Result](ctx, s, []Child{{ID: id}}, nil)
	if err != nil || got[0].Outcome != runs.OutcomeHacked || got[0].Score != nil || got[0].Review == nil {
		t.Fatalf("read back: %+v %v", got[0], err)
	}
	r := runs.Result{RunID: id, Outcome: runs.OutcomeScored}
	if err := Complete(ctx, failingList{s}, &r, nil, 0); err == nil {
		t.Fatal("a result was completed though its verdicts could not be read")
	}
}
