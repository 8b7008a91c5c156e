package bundle

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// TestPeopleStayInTheStore (audit L3): a person's session recordings and
// notes, and their labels, are left out of a bundle unless asked for.
func TestPeopleStayInTheStore(t *testing.T) {
	ctx := context.Background()
	store, s, v := fixture(t)
	res := `{"run_id":"b/agent/task/s0","outcome":"scored","score":0.75,"people":["Alice Example"],"notes":[{"at_s":10,"text":"tried lr 3e-4"}],"big":12345678901234567890}`
	for key, body := range map[string]string{
		blob.RunPrefix(runID) + "result.json":        res,
		blob.RunPrefix(runID) + "sessions/0001.cast": `{"version":2}` + "\n[0.1,\"o\",\"alice@host$ \"]\n",
	} {
		if err := store.Put(ctx, key, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
	}
	for _, with := range []bool{false, true} {
		dir := t.TempDir()
		w := &Writer{Dir: dir, Store: store, Signer: s, Parallel: 2, WithSessions: with}
		if _, err := w.Run(ctx, Input{RunID: runID, Final: 1, Task: "t", Agent: "a", Evaluator: "e"}); err != nil {
			t.Fatal(err)
		}
		c, err := verifyDir(t, dir, EnvelopeKey(runID), []*Verifier{v}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, cast := os.Stat(filepath.Join(dir, filepath.FromSlash(blob.RunPrefix(runID)+"sessions/0001.cast")))
		got, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(blob.RunPrefix(runID)+"result.json")))
		kept := strings.Contains(string(got), "Alice") || strings.Contains(string(got), "lr 3e-4")
		if with != (cast == nil) || with != kept || c.Predicate.WithSessions != with {
			t.Fatalf("with sessions %v: recording kept %v, notes and names kept %v (%s)", with, cast == nil, kept, got)
		}
		if !with && (!strings.Contains(string(got), `"person 1"`) || !strings.Contains(string(got), "12345678901234567890")) {
			t.Fatalf("the result lost more than the person's: %s", got)
		}
	}
}

// TestStaleBundles (audit L4): given the operator's store, a bundle says
// when its run was bundled again since, or has a verdict it lacks.
func TestStaleBundles(t *testing.T) {
	ctx := context.Background()
	store, s, v := fixture(t)
	dir := write(t, store, s)
	old, err := verifyDir(t, dir, EnvelopeKey(runID), []*Verifier{v}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// write bundled twice; the second is the latest.
	if why, err := Stale(ctx, store, old); err != nil || len(why) != 0 {
		t.Fatalf("the latest bundle: %v %v", why, err)
	}
	verdict := blob.RunPrefix(runID) + "review/01764633600000000000.json"
	if err := store.Put(ctx, verdict, strings.NewReader(`{"verdict":"hacked","by":"rev"}`)); err != nil {
		t.Fatal(err)
	}
	if why, _ := Stale(ctx, store, old); len(why) != 1 || !strings.Contains(why[0], "verdict newer") {
		t.Fatalf("after a verdict: %v", why)
	}
	time.Sleep(time.Millisecond)
	again := &Writer{Dir: t.TempDir(), Store: store, Signer: s, Parallel: 2}
	if _, err := again.Run(ctx, Input{RunID: runID, Final: 1, Task: "t", Agent: "a", Evaluator: "e"}); err != nil {
		t.Fatal(err)
	}
	if why, _ := Stale(ctx, store, old); len(why) != 2 || !strings.Contains(why[0], "bundled again") {
		t.Fatalf("after another bundle: %v", why)
	}
}
