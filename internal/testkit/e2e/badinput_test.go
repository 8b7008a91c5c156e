package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInput: each mistake gets one clear line naming the problem, exit
// code 2, and no workflow is started.
func TestBadInput(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.start("worker", "--dev", "--server-only")
	e.waitServer()

	badTasks := t.TempDir()
	if err := os.WriteFile(filepath.Join(badTasks, "broken.yaml"), []byte("id: broken\ntitle: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unknownKey := filepath.Join(t.TempDir(), "mlrb.yaml")
	if err := os.WriteFile(unknownKey, []byte("checkpoint:\n  intervall: 2s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badYAML := filepath.Join(t.TempDir(), "mlrb.yaml")
	if err := os.WriteFile(badYAML, []byte("checkpoint: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := []string{"run", "--agent", "reference", "--seed", "1"}
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown task", nil, append(run, "--task", "nope"), `unknown task "nope"`},
		{"malformed task file", nil, append(run, "--task", "mini_baby_lm", "--tasks-dir", badTasks), "task file"},
		{"bad duration flag", nil, append(run, "--task", "mini_baby_lm", "--time-limit", "abc"), `invalid argument "abc" for "--time-limit"`},
		{"bad duration in env", []string{"MLRB_CHECKPOINT_INTERVAL=abc"}, append(run, "--task", "mini_baby_lm"), `checkpoint.interval: "abc" is not a duration`},
		{"checkpoint interval too short for the budget", []string{"MLRB_CHECKPOINT_INTERVAL=10s"}, append(run, "--task", "mini_baby_lm", "--time-limit", "24h"),
			"checkpoint.interval 10s would take 8640 checkpoints in a budget of 24h0m0s, over the 2000 a run's history holds well: set it to 44s or more"},
		{"negative seed", nil, []string{"run", "--task", "mini_baby_lm", "--seed", "-3"}, "--seed: -3 is negative"},
		{"unreachable temporal", nil, append(run, "--task", "mini_baby_lm", "--address", "127.0.0.1:1"), "cannot reach Temporal at 127.0.0.1:1"},
		{"address without port", nil, append(run, "--task", "mini_baby_lm", "--address", "localhost"), `temporal.address: "localhost" is not host:port`},
		{"unknown config key", nil, append(run, "--task", "mini_baby_lm", "--config", unknownKey), `unknown config key "checkpoint.intervall"`},
		{"config not yaml", nil, append(run, "--task", "mini_baby_lm", "--config", badYAML), "is not valid YAML"},
		{"missing config file", nil, append(run, "--task", "mini_baby_lm", "--config", "/nonexistent/mlrb.yaml"), "config file /nonexistent/mlrb.yaml"},
		{"unknown agent", nil, []string{"run", "--task", "mini_baby_lm", "--agent", "gpt-9"}, `unknown agent "gpt-9"`},
		{"full task, reference agent", nil, append(run, "--task", "baby_lm"), "only does the mini suite"},
		{"missing task flag", nil, []string{"run"}, `required flag(s) "task" not set`},
		{"metrics endpoint without a port", []string{"MLRB_METRICS_LISTEN=localhost"}, append(run, "--task", "mini_baby_lm"), `metrics.listen: "localhost" is not host:port with a port`},
		{"bad value in env", []string{"MLRB_HOST_MAX_AGENTS=0"}, append(run, "--task", "mini_baby_lm"), "host.max_agents: 0 must be at least 1"},
		{"unknown run", nil, []string{"status", "no-such-run"}, `no run or benchmark "no-such-run"`},
		{"an image without a label", nil, []string{"run", "--task", "baby_lm", "--image", "x", "--provider", "openai"}, "--image: name the one-off agent with --label NAME"},
		{"secret value for a name", nil, []string{"run", "--task", "baby_lm", "--label", "e2e-image", "--image", "x", "--provider", "openai", "--secret", "sk-live-123"}, "--secret #1 is not an environment variable name"},
		{"unknown provider", nil, []string{"run", "--task", "baby_lm", "--label", "e2e-image", "--image", "x", "--provider", "mistral"}, `provider "mistral": an image agent needs one of openai, anthropic`},
		{"unknown command", nil, []string{"launch"}, `unknown command "launch"`},
		{"watch an unknown id", nil, []string{"watch", "no-such-bench"}, `no run or benchmark "no-such-bench"`},
		{"watch with a bad refresh", nil, []string{"watch", "x", "--refresh", "0s"}, "--refresh: 0s must be positive"},
		{"resume an unknown benchmark", nil, []string{"benchmark", "resume", "no-such-bench"}, `no run or benchmark "no-such-bench"`},
		{"benchmark with an unknown task", nil, []string{"benchmark", "--agents", "noop", "--tasks", "nope"}, `unknown task "nope"`},
		{"results in an unknown format", nil, []string{"results", "x", "--format", "xls"}, `--format: "xls" is not one of`},
		{"a task twice", nil, []string{"benchmark", "--agents", "noop", "--tasks", "mini_baby_lm,mini_mini_pile,mini_baby_lm"}, `--tasks: "mini_baby_lm" is given twice`},
		{"an agent twice", nil, []string{"benchmark", "--agents", "noop,reference,noop", "--tasks", "mini_baby_lm"}, `--agents: "noop" is given twice`},
		{"a run id with ..", nil, append(run, "--task", "mini_baby_lm", "--id", "a..b"), `--id: "a..b" may hold`},
		{"a run id with /", nil, append(run, "--task", "mini_baby_lm", "--id", "a/b"), `--id: "a/b" may hold`},
		{"a benchmark id with ..", nil, []string{"benchmark", "--agents", "noop", "--tasks", "mini_baby_lm", "--id", "x..y"}, `--id: "x..y" may hold`},
		{"a benchmark of an unknown agent", nil, []string{"benchmark", "--agents", "noop,gpt-9", "--tasks", "baby_lm"}, `--agents: unknown agent "gpt-9"`},
		{"a built-in agent on a full task", nil, []string{"benchmark", "--agents", "noop", "--tasks", "baby_lm"}, "--agents: agent noop is built in (noop) and only does the mini suite"},
		{"a secret value for a built-in agent", nil, append(run, "--task", "mini_baby_lm", "--secret", "OPENAI_API_KEY=sk-live-123"), "--secret #1 is not an environment variable name"},
		{"a worker credential as a secret", nil, append(run, "--task", "mini_baby_lm", "--secret", "MLRB_STORAGE_S3_SECRET_ACCESS_KEY"), "--secret #1 names MLRB_STORAGE_S3_SECRET_ACCESS_KEY, refused: names starting MLRB_ are the worker's own credentials"},
		{"an AWS credential as a secret", nil, append(run, "--task", "mini_baby_lm", "--secret", "AWS_SECRET_ACCESS_KEY"), "names starting AWS_ are the worker's own"},
		{"demo with an unknown agent", nil, []string{"demo", "--agent", "bogus"}, `unknown agent "bogus"`},
		{"replay a missing history", nil, []string{"replay", "/nonexistent/run.json"}, "replay: history: open /nonexistent/run.json: no such file or directory"},
		{"replay a file that is not a history", nil, []string{"replay", badYAML}, "replay: history " + badYAML + ": temporalproto: syntax error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			saved := e.vars
			e.vars = append(append([]string(nil), e.vars...), tc.env...)
			defer func() { e.vars = saved }()
			out, errs, code := e.starter(tc.args...)
			if code != 2 {
				t.Fatalf("exit code %d, want 2 (stdout %q, stderr %q)", code, out, errs)
			}
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("stderr = %q, want one line containing %q", errs, tc.want)
			}
			if strings.Contains(out+errs, "sk-live-123") {
				t.Fatalf("the error echoes a secret value: %q", errs)
			}
		})
	}
	out, errs, code := e.starter("list")
	if code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("after bad input, list shows runs (exit %d): %s %s", code, out, errs)
	}
}
