package activities

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/reference"
	"github.com/mlrb/mlrb/internal/runtime"
)

// TestProcessEvaluatorNamedByItsScoringCode: the reference evaluator run
// as a process of {self} is named as that binary names its scoring code
// (`reference-eval --name`), the same across builds that score alike (the
// anchors shipped with the mini suite hold for every build's runs); a
// binary that cannot say, or says something else, and any other process
// evaluator, by the binary's hash.
func TestProcessEvaluatorNamedByItsScoringCode(t *testing.T) {
	ctx := context.Background()
	scoring := reference.Evaluator()
	binary := func(script string) string {
		p := filepath.Join(t.TempDir(), "mlrb-agent")
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	name := func(self string, command ...string) string {
		t.Helper()
		got, err := (&DirWorkspace{Self: self}).Evaluator(ctx, runtime.TaskSpec{Command: command})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for i, build := range []string{
		`[ "$1 $2" = "reference-eval --name" ] && echo '` + scoring + `'`,
		`# another build of the same scoring code
		echo '` + scoring + `'`,
	} {
		self := binary(build)
		if got := name(self, self, reference.EvalCommand, "--task", "mini_baby_lm"); got != scoring {
			t.Fatalf("build %d: the reference evaluator is %q; want %q", i, got, scoring)
		}
		if got := name(self, "/bin/sh", "-c", "score"); !strings.HasPrefix(got, "process mlrb-agent sha256:") {
			t.Fatalf("build %d: another process evaluator is %q; want the binary's hash", i, got)
		}
	}
	for _, old := range []string{"exit 1", "echo 'builtin reference-eval sha256:not-a-hash'"} {
		self := binary(old)
		if got := name(self, self, reference.EvalCommand); !strings.HasPrefix(got, "process mlrb-agent sha256:") {
			t.Fatalf("a binary answering %q is named %q; want its hash", old, got)
		}
	}
}
