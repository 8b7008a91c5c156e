package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/process/cli"
)

// execute runs the starter in process with args, against a config of
// its own (a state dir under the test's, a Temporal address nobody
// listens on: a command that dials before it checks its input fails with
// a connection error instead of the usage error these tests expect).
func execute(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "mlrb.yaml")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MLRB_CONFIG", cfg)
	root := newRoot()
	root.SilenceErrors, root.SilenceUsage = true, true
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	base := []string{"--state-dir", t.TempDir(), "--address", "127.0.0.1:1"}
	root.SetArgs(append(args, base...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// usage tells an error the starter exits 2 for.
func usage(err error) bool {
	var ue *cli.UsageError
	return errors.As(err, &ue) || cli.IsUsage(err)
}

// TestBadInputIsRefusedBeforeAnythingStarts: each command checks what it
// is given, names the flag and exits 2 (a usage error), before it dials
// Temporal or opens a store.
func TestBadInputIsRefusedBeforeAnythingStarts(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown task", []string{"run", "--task", "nope"}, "--task"},
		{"negative seed", []string{"run", "--task", "mini_baby_lm", "--seed", "-1"}, "--seed"},
		{"negative limit", []string{"run", "--task", "mini_baby_lm", "--time-limit", "-1s"}, "--time-limit"},
		{"bad run id", []string{"run", "--task", "mini_baby_lm", "--id", "a/b"}, "--id"},
		{"image without a label", []string{"run", "--task", "mini_baby_lm", "--image", "x"}, "--label"},
		{"image and an agent", []string{"run", "--task", "baby_lm", "--agent", "noop", "--image", "x", "--label", "x"}, "--image"},
		{"label without an image", []string{"run", "--task", "mini_baby_lm", "--label", "x"}, "--label"},
		{"unknown agent", []string{"run", "--task", "baby_lm", "--agent", "mlrb"}, "--agent: unknown agent"},
		{"secret of ours", []string{"run", "--task", "mini_baby_lm", "--secret", "AWS_SECRET_ACCESS_KEY"}, "--secret"},
		{"built-in agent on a full task", []string{"run", "--task", "baby_lm"}, "needs an agent image"},
		{"built-in agent on the full suite", []string{"benchmark", "--suite", "full", "--agents", "mlrb-gpt-4o,noop"}, "--agents: agent noop is built in"},
		{"bad interval", []string{"run", "--task", "mini_baby_lm", "--interval", "0s"}, "interval"},
		{"bad suite", []string{"benchmark", "--suite", "x"}, "--suite"},
		{"zero seeds", []string{"benchmark", "--seeds", "0"}, "--seeds"},
		{"zero continue-after", []string{"benchmark", "--continue-after", "0"}, "--continue-after"},
		{"unknown agent in a benchmark", []string{"benchmark", "--agents", "reference,referense"}, "--agents: unknown agent \"referense\""},
		{"task twice", []string{"benchmark", "--tasks", "mini_baby_lm,mini_baby_lm"}, "--tasks"},
		{"bad format", []string{"benchmark", "--format", "xls"}, "--format"},
		{"demo with an image agent", []string{"demo", "--agent", "mlrb-gpt-4o"}, "--agent"},
		{"unknown agent to show", []string{"agents", "show", "nope"}, "unknown agent"},
		{"demo with no seeds", []string{"demo", "--seeds", "0"}, "--seeds"},
		{"fork without checkpoint", []string{"fork", "r"}, "--from-checkpoint"},
		{"fork with a bad id", []string{"fork", "r", "--from-checkpoint", "1", "--id", "../x"}, "--id"},
		{"extend by nothing", []string{"extend", "r", "--by", "0s"}, "--by"},
		{"retry-eval of nothing", []string{"retry-eval"}, "RUN_ID"},
		{"retry-eval of a benchmark without --failed", []string{"retry-eval", "--benchmark", "b"}, "--failed"},
		{"watch that never redraws", []string{"watch", "r", "--refresh", "0s"}, "--refresh"},
		{"results in a bad format", []string{"results", "b", "--format", "xls"}, "--format"},
		{"restore into a full dir", []string{"checkpoint", "restore", "r", full}, "not empty"},
		{"unknown task to show", []string{"tasks", "show", "nope"}, "nope"},
		{"anchor without a role", []string{"anchors", "measure", "mini_baby_lm", "--agent", "noop"}, "--role"},
		{"anchor of another role", []string{"anchors", "measure", "mini_baby_lm", "--agent", "noop", "--role", "best"}, "--role"},
		{"anchor without an agent", []string{"anchors", "measure", "mini_baby_lm", "--role", "top"}, "--agent"},
		{"anchor of an unknown task", []string{"anchors", "measure", "nope", "--role", "top", "--agent", "noop"}, "TASK"},
		{"anchor over no seeds", []string{"anchors", "measure", "mini_baby_lm", "--role", "top", "--agent", "noop", "--seeds", "0"}, "--seeds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := execute(t, c.args...)
			if !usage(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want a usage error naming %q", err, c.want)
			}
		})
	}
}

func TestTasksListAndShow(t *testing.T) {
	out, _, err := execute(t, "tasks", "list", "--suite", "mini")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "mini_baby_lm") || strings.Contains(out, "\nbaby_lm ") {
		t.Fatalf("tasks list --suite mini:\n%s", out)
	}
	out, _, err = execute(t, "tasks", "show", "mini_baby_lm")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "# hash ") || !strings.Contains(out, "--- prompt the agent gets ---") {
		t.Fatalf("tasks show:\n%s", out)
	}
}

func TestConfigShowAndKeys(t *testing.T) {
	out, _, err := execute(t, "config", "show")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "127.0.0.1:1") {
		t.Fatalf("config show does not hold the flag's address:\n%s", out)
	}
	out, _, err = execute(t, "config", "keys")
	if err != nil || !strings.Contains(out, "`temporal.address`") {
		t.Fatalf("config keys: %v\n%s", err, out)
	}
}

// TestReplayRecordedHistories: the corpus replays through this build,
// and a file that is not a history is bad input, found before anything
// is replayed.
func TestReplayRecordedHistories(t *testing.T) {
	file := filepath.Join("..", "workflows", "testdata", "benchmark_ended.json")
	out, _, err := execute(t, "replay", file)
	if err != nil || !strings.HasPrefix(out, "ok    ") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	junk := filepath.Join(t.TempDir(), "junk.json")
	if err := os.WriteFile(junk, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = execute(t, "replay", file, junk)
	if !usage(err) || out != "" {
		t.Fatalf("replay of a non-history: %v, printed %q", err, out)
	}
}

// TestCommandsThatNeedTheServerSayWhichServer: a command past its checks
// names the address it could not reach.
func TestCommandsThatNeedTheServerSayWhichServer(t *testing.T) {
	for _, args := range [][]string{{"status", "r"}, {"result", "r"}, {"list"}, {"cancel", "r"}, {"run", "--task", "mini_baby_lm"}} {
		_, _, err := execute(t, args...)
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("%v: err = %v, want one naming the address", args, err)
		}
	}
}
