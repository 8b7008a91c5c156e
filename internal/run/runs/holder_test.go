package runs

import "testing"

// TestHolderFormats: the formats are on disk (lease tables), in job names
// and in instance tags: they never change.
func TestHolderFormats(t *testing.T) {
	attempt := Holder{RunID: "b/a/t/s1", N: 3}
	eval := Holder{RunID: "b/a/t/s1", Role: RoleEvaluation, N: 2}
	if attempt.Token() != "b/a/t/s1#3" || eval.Token() != "b/a/t/s1#evaluation2" {
		t.Fatalf("tokens %q %q", attempt.Token(), eval.Token())
	}
	if attempt.JobKey() != "b/a/t/s1" || eval.JobKey() != "b/a/t/s1#evaluation" {
		t.Fatalf("job keys %q %q", attempt.JobKey(), eval.JobKey())
	}
	for _, h := range []Holder{attempt, eval} {
		if got := ParseJobKey(h.JobKey(), h.N); got != h {
			t.Fatalf("ParseJobKey(%q) = %+v, want %+v", h.JobKey(), got, h)
		}
	}
}
