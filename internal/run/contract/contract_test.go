package contract

import (
	"strings"
	"testing"
	"time"
)

// The environment an attempt builds is the one an agent reads back.
func TestEnvironRoundTrip(t *testing.T) {
	in := Env{Task: "mini_baby_lm", Seed: 7, Workdir: "/app/work", Deadline: time.Date(2026, 11, 23, 10, 0, 0, 5, time.UTC),
		DeadlineFile: "/mlrb-control/deadline", TimeRemaining: 90 * time.Second, Attempt: 3, Resumed: true,
		TaskSpec: "/mlrb-run/task.json", PromptFile: "/mlrb-run/prompt.md", Suite: "mini", Provider: "openai"}
	env := in.Environ()
	if env[EnvOutputDir] != "/app/work/output" || env[EnvHarnessBenchmark] != "mini_benchmark" || env[EnvHarnessTask] != "mini_baby_lm" {
		t.Fatalf("environ: %v", env)
	}
	out, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !out.Deadline.Equal(in.Deadline) {
		t.Fatalf("deadline %v, want %v", out.Deadline, in.Deadline)
	}
	out.Deadline = in.Deadline
	if out != in {
		t.Fatalf("read back %+v, want %+v", out, in)
	}
}

func TestFromEnvNamesTheMissingVariable(t *testing.T) {
	env := Env{Task: "t", Seed: 1, Workdir: "/w", Deadline: time.Now()}.Environ()
	for _, k := range []string{EnvTask, EnvSeed, EnvWorkdir, EnvOutputDir, EnvDeadline} {
		_, err := FromEnv(func(name string) string {
			if name == k {
				return ""
			}
			return env[name]
		})
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("without %s: %v", k, err)
		}
	}
}

func TestDeadlineFileWins(t *testing.T) {
	dir := t.TempDir()
	start := time.Now().Truncate(time.Second)
	e := Env{Deadline: start, DeadlineFile: dir + "/" + DeadlineFile}
	if !e.CurrentDeadline().Equal(start) {
		t.Fatal("without a file the start deadline holds")
	}
	later := start.Add(time.Hour)
	if err := WriteDeadline(dir, later); err != nil {
		t.Fatal(err)
	}
	if !e.CurrentDeadline().Equal(later) {
		t.Fatalf("deadline %v, want the file's %v", e.CurrentDeadline(), later)
	}
}

func TestGatewayNamesAreNoSecrets(t *testing.T) {
	for _, n := range append(GatewayNames, "openai_api_key") {
		if err := CheckSecretName(n); err == nil || !strings.Contains(err.Error(), "gateway") {
			t.Errorf("%s: %v", n, err)
		}
	}
	if err := CheckSecretName("HUGGINGFACE_TOKEN"); err != nil {
		t.Error(err)
	}
}
