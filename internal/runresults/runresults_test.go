package runresults

import (
	"context"
	"slices"
	"testing"

	"github.com/mlrb/mlrb/internal/blob"
)

func TestPutGetAll(t *testing.T) {
	ctx := context.Background()
	s, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
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
	got, missing, err := GetAll[res](ctx, s, []string{"b/a/t/s1", "b/a/t/s2", "b/a/t/s3"}, func(int) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["b/a/t/s2"].Outcome != "scored" || !slices.Equal(missing, []string{"b/a/t/s3"}) || calls != 3 {
		t.Fatalf("got %v, missing %v, %d calls", got, missing, calls)
	}
}
