package keys

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFamiliesAreWhatTheyBuild: each family's constructors build keys of
// its pattern (its literal head, and its tail's shape).
func TestFamiliesAreWhatTheyBuild(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	h := strings.Repeat("ab", 32)
	built := map[string]string{
		"Chunk": Chunk(h), "Manifest": Manifest("b/a/t/s1", 3), "Fence": Fence("r", 2), "Result": Result("r"),
		"RunCertificate": RunCertificate("r"), "Evaluation": Evaluation("r", "final-1-try-1", "results.json"),
		"AttemptLogs": AttemptLogs("r", 1) + "0.log", "CallRecord": CallRecord("r", 1, 7), "CallChunk": CallChunk("r", h),
		"Observation": Observation("r", 1), "Policy": Policy("r", 1), "Writes": Writes("r", 1), "Session": Session("r", "1-ann.cast"),
		"Review": Review("r", at), "BundleEntry": BundleEntry("r", at), "BundleMeta": BundleMeta("r") + "spec.yaml",
		"Leaderboard": Leaderboard("b1", "json"), "Plan": Plan("b1", at), "Anchor": Anchor("t", "top"), "Control": Control("t", "img cmd"),
		"Certificate": Certificate("sha256:" + h), "Host": Host("h1"), "Prices": Prices(h), "GPUPrices": GPUPrices(h),
		"SaveLocks": SaveLocks + "x.json", "GCLocks": GCLocks + "x.json", "ClockLocks": ClockLocks + "x", "GCGeneration": GCGeneration,
	}
	seen := map[string]bool{}
	for _, f := range Families {
		patterns := strings.Split(f.Pattern, ", ")
		for _, c := range strings.Split(f.Built, ", ") {
			k, ok := built[c]
			if !ok {
				t.Fatalf("family %s names keys.%s, which this test does not build", f.Pattern, c)
			}
			seen[c] = true
			match := false
			for _, p := range patterns {
				head, _, _ := strings.Cut(strings.TrimSuffix(p, "…"), "<")
				head, _, _ = strings.Cut(head, "{")
				match = match || strings.HasPrefix(k, head)
			}
			if !match {
				t.Errorf("keys.%s built %q, which is not of %s", c, k, f.Pattern)
			}
		}
	}
	for c := range built {
		if !seen[c] {
			t.Errorf("keys.%s is in no family", c)
		}
	}
	if got := Run("b/a/t/s1"); got != "runs/b%2Fa%2Ft%2Fs1/" {
		t.Errorf("a run's folder is %q: its id is path-escaped", got)
	}
}

// TestDesignPageIsTheTable: docs/design/checkpoints.md's key table is
// Families (regenerate: MLRB_UPDATE_DOCS=1 go test ./internal/store/keys).
func TestDesignPageIsTheTable(t *testing.T) {
	page := filepath.Join("..", "..", "..", "docs", "design", "checkpoints.md")
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	const open, end = "<!-- key-table -->\n", "<!-- /key-table -->"
	s := string(b)
	i, j := strings.Index(s, open), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated key table (%s … %s)", page, strings.TrimSpace(open), end)
	}
	if os.Getenv("MLRB_UPDATE_DOCS") == "1" {
		s = s[:i+len(open)] + Markdown() + s[j:]
		if err := os.WriteFile(page, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		i, j = strings.Index(s, open), strings.Index(s, end)
	}
	if got := s[i+len(open) : j]; got != Markdown() {
		t.Fatalf("%s's key table is not keys.Families; regenerate it: MLRB_UPDATE_DOCS=1 go test ./internal/store/keys", page)
	}
}
