package evaluation

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/activities"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
)

// TestWeightFilesPastTheBoundAreCounted: a model dir of more weight files
// than are compared says how many were left out, never silently stops.
func TestWeightFilesPastTheBoundAreCounted(t *testing.T) {
	dir := t.TempDir()
	for i := range maxImageCopyFiles + 3 {
		f, err := os.Create(filepath.Join(dir, "w"+strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		// Sparse: its size counts, its blocks do not.
		if err := f.Truncate(minImageCopy); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, skipped, err := weightFiles(dir)
	if err != nil || len(files) != maxImageCopyFiles || skipped != 3 {
		t.Fatalf("%d files, %d skipped, %v", len(files), skipped, err)
	}
	a := &Evaluations{Sandbox: &workspace.Sandbox{Workspace: &workspace.DirWorkspace{}}, Logger: zap.NewNop()}
	copies, why := a.imageCopies(t.Context(), activities.EvalInput{RunID: "r", AgentImage: "img"}, dir)
	if len(copies) != 0 || !strings.Contains(why, "3 weight files past the first 10000 were not compared") {
		t.Fatalf("copies %v, not compared %q", copies, why)
	}
	if _, why := a.imageCopies(t.Context(), activities.EvalInput{RunID: "r", AgentImage: "img"}, filepath.Join(dir, "none")); !strings.Contains(why, "the model's weight files") {
		t.Fatalf("a model dir that cannot be read: %q", why)
	}
}
