package certify

import (
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/results/certificate"
	"github.com/mlrb/mlrb/internal/run/budget"
	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// TestExtendVerdicts: the extended run passes when it worked past the
// original deadline; an agent that stops by it fails only when its plain
// run shows it had the work to go on; one that is done sooner, or a run
// that could not be extended, is not judged.
func TestExtendVerdicts(t *testing.T) {
	run := func(used float64, end string) *runs.Result {
		return &runs.Result{RunID: "r", Budget: budget.Account{UsedS: used}, AttemptLog: []runs.AttemptRecord{{N: 1, End: end, ToS: used}}}
	}
	e := &evidence{}
	for _, c := range []struct {
		name            string
		used, unhurried float64
		end             string
		err             error
		want            certificate.Status
	}{
		{"past the deadline", 21, 21, "exited", nil, certificate.Pass},
		{"stopped by it", 7.4, 12, "exited", nil, certificate.Fail},
		{"done sooner anyway", 5, 5, "exited", nil, certificate.NotApplicable},
		{"not extended", 7.4, 12, "exited", errors.New("it had ended"), certificate.NotApplicable},
	} {
		if got := e.extend(t.Context(), run(c.used, c.end), c.unhurried, 8*time.Second, c.err); got.Status != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got.Status, got.Summary, c.want)
		}
	}
}

// TestRewrittenUnchanged: a restored file written again with the same
// bytes counts; one changed, one untouched, a link or an empty file does
// not.
func TestRewrittenUnchanged(t *testing.T) {
	f := func(p string, mtime int64, chunk string) checkpoint.File {
		return checkpoint.File{Path: p, Mode: 0o644, Size: 10, MTime: mtime, Chunks: []string{chunk}}
	}
	restored := &checkpoint.Manifest{Files: []checkpoint.File{f("a", 1, "x"), f("b", 1, "y"), f("c", 1, "z"),
		{Path: "l", Mode: fs.ModeSymlink | 0o777, Link: "a"}, {Path: "e", Mode: 0o644}}}
	after := &checkpoint.Manifest{Files: []checkpoint.File{f("a", 2, "x"), f("b", 2, "y2"), f("c", 1, "z"),
		{Path: "l", Mode: fs.ModeSymlink | 0o777, Link: "a", MTime: 9}, {Path: "e", Mode: 0o644, MTime: 9}}}
	got, regular := rewrittenUnchanged(restored, after)
	if len(got) != 1 || got[0] != "a" || regular != 3 {
		t.Fatalf("rewritten %v of %d regular files; want [a] of 3", got, regular)
	}
}
