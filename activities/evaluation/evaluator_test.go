package evaluation

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/internal/scoring/reference"
)

// TestReferenceEvaluatorNamedByItsScoringCode: the reference evaluator
// ({self} reference-eval) is named as its binary names its scoring code
// (`reference-eval --name`), run through the workspace's runtime as any
// evaluator is: two builds that score alike are one evaluator. A binary
// that cannot say, or says something else, and any other evaluator, are
// named by the binary's hash.
func TestReferenceEvaluatorNamedByItsScoringCode(t *testing.T) {
	ctx := context.Background()
	scoring := reference.Evaluator()
	proc, err := runtime.NewProcess(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	named := func(script string, template ...string) string {
		t.Helper()
		dir := t.TempDir()
		self := filepath.Join(dir, "mlrb-agent")
		if err := os.WriteFile(self, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		a := &workspace.Sandbox{Workspace: &workspace.DirWorkspace{Process: proc, Self: self}, Logger: zap.NewNop()}
		spec := runtime.TaskSpec{Name: "eval-" + filepath.Base(dir), Dir: dir, LogPath: filepath.Join(dir, "eval.log"),
			Command: workspace.Expand(template, map[string]string{"self": self})}
		return evaluatorName(ctx, a, spec, template)
	}
	refEval := []string{"{self}", reference.EvalCommand, "--task", "mini_baby_lm"}
	for i, build := range []string{
		`[ "$1 $2" = "reference-eval --name" ] && echo '` + scoring + `'`,
		`# another build of the same scoring code
		echo '` + scoring + `'`,
	} {
		if got := named(build, refEval...); got != scoring {
			t.Fatalf("build %d: the reference evaluator is %q; want %q", i, got, scoring)
		}
		if got := named(build, "/bin/sh", "-c", "score"); !strings.HasPrefix(got, "process mlrb-agent sha256:") {
			t.Fatalf("build %d: another evaluator is %q; want the binary's hash", i, got)
		}
	}
	for _, old := range []string{"exit 1", "echo 'builtin reference-eval sha256:not-a-hash'"} {
		if got := named(old, refEval...); !strings.HasPrefix(got, "process mlrb-agent sha256:") {
			t.Fatalf("a binary answering %q is named %q; want its hash", old, got)
		}
	}
}
