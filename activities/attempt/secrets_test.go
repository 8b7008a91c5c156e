package attempt

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/mlrb/mlrb/internal/sandbox/gateway"
	"github.com/mlrb/mlrb/internal/sandbox/workspace"
	"github.com/mlrb/mlrb/tasks"
)

// A malformed line of agent.env_file is named by its number, never shown:
// the error goes into the run's history and logs.
func TestEnvFileErrorHidesTheLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(path, []byte("WANDB_API_KEY=sk-fine\nsk-live-SECRETVALUE oops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Attempts{Sandbox: &workspace.Sandbox{}, EnvFile: path, Logger: zap.NewNop()}
	_, err := a.secretValues([]string{"WANDB_API_KEY"})
	if err == nil || strings.Contains(err.Error(), "SECRETVALUE") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v; want line 2 named and its text left out", err)
	}
}

// TestSecretNeverFromTheWorkersEnvironment is audit #6: a run naming a
// worker credential got the worker's value (secretValues fell back to
// its environment). Values come from agent.env_file only, the worker's
// own names are refused even there, and agent.secret_names narrows the
// rest.
func TestSecretNeverFromTheWorkersEnvironment(t *testing.T) {
	t.Setenv("MLRB_STORAGE_S3_SECRET_ACCESS_KEY", "worker-s3-secret")
	t.Setenv("ONLY_IN_ENV", "worker-env-value")
	path := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(path, []byte("WANDB_API_KEY=sk-fine\nAWS_SECRET_ACCESS_KEY=in-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Attempts{Sandbox: &workspace.Sandbox{}, EnvFile: path, Logger: zap.NewNop()}
	for name, want := range map[string]string{
		"MLRB_STORAGE_S3_SECRET_ACCESS_KEY": "the worker's own credentials",
		"AWS_SECRET_ACCESS_KEY":             "the worker's own credentials",
		"temporal_api_key":                  "the worker's own credentials",
		"ONLY_IN_ENV":                       "not in agent.env_file",
	} {
		got, err := a.secretValues([]string{name})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "worker-") {
			t.Errorf("%s: %v, %v; want refused (%s)", name, got, err, want)
		}
	}
	got, err := a.secretValues([]string{"WANDB_API_KEY"})
	if err != nil || got["WANDB_API_KEY"] != "sk-fine" {
		t.Fatalf("a secret of the env file: %v, %v", got, err)
	}
	a.SecretNames = []string{"HUGGINGFACE_TOKEN"}
	if _, err := a.secretValues([]string{"WANDB_API_KEY"}); err == nil || !strings.Contains(err.Error(), "agent.secret_names") {
		t.Fatalf("a name outside the allow-list: %v", err)
	}
	if _, err := (&Attempts{Sandbox: &workspace.Sandbox{}}).secretValues([]string{"ONLY_IN_ENV"}); err == nil {
		t.Fatal("no env file: the worker's environment must not answer")
	}
}

// TestProviderKeysAreNeverSecrets (audit N10): a provider key under a name
// of the operator's (gateway.openai_key) is refused as a secret, as the
// default names are.
func TestProviderKeysAreNeverSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(path, []byte("TEAM_OPENAI=sk-live\nHF=hf-x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &Attempts{Sandbox: &workspace.Sandbox{}, EnvFile: path, LLM: LLMGateway{OpenAI: gateway.Upstream{KeyName: "TEAM_OPENAI"}}, Logger: zap.NewNop()}
	if _, err := a.secretValues([]string{"team_openai"}); err == nil || !strings.Contains(err.Error(), "provider key") {
		t.Fatalf("the renamed provider key as a secret: %v", err)
	}
	if got, err := a.secretValues([]string{"HF"}); err != nil || got["HF"] != "hf-x" {
		t.Fatalf("another secret: %v %v", got, err)
	}
}

// TestAgentsAreNotToldTheMarks (audit F10): the task spec an agent reads
// has no curve, so it cannot time its best work to the marks.
func TestAgentsAreNotToldTheMarks(t *testing.T) {
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cat.Get("mini_baby_lm")
	if spec.Evaluation.Curve == nil {
		t.Fatal("mini_baby_lm has no curve to hide")
	}
	seen := agentView(*spec)
	b, _ := json.Marshal(seen)
	if seen.Evaluation.Curve != nil || strings.Contains(string(b), `"curve"`) || spec.Evaluation.Curve == nil {
		t.Fatalf("the agent's spec: %s", b)
	}
}

// L3: the observation scrubs an agent's command lines of the attempt's
// gateway token as of its secrets (curl -H "Authorization: Bearer …").
func TestObservationRedactsTheAttemptToken(t *testing.T) {
	ai := &attemptLLM{serve: &gateway.LLM{Token: "mlrb-tok"}}
	secrets := []string{"hf_secret"}
	got := redactor(ai.redacting(secrets))("curl -H 'Authorization: Bearer mlrb-tok' -H 'X: hf_secret'")
	if strings.Contains(got, "mlrb-tok") || strings.Contains(got, "hf_secret") {
		t.Fatalf("redacted: %q", got)
	}
	if len(secrets) != 1 {
		t.Fatalf("the run's secrets were changed: %v", secrets)
	}
	if r := (*attemptLLM)(nil).redacting(secrets); !slices.Equal(r, secrets) {
		t.Fatalf("no gateway: %v", r)
	}
}

// L7: an env file others may read gives no secrets.
func TestSharedEnvFileGivesNoSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(path, []byte("WANDB_API_KEY=sk-fine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &Attempts{Sandbox: &workspace.Sandbox{}, EnvFile: path, Logger: zap.NewNop()}
	if _, err := a.secretValues([]string{"WANDB_API_KEY"}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a 0644 env file: %v", err)
	}
}
