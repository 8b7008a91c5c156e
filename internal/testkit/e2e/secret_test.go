package e2e

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/testkit/testenv"
	"google.golang.org/protobuf/encoding/protojson"
)

const (
	fakeOpenAI = "sk-e2e-fake-KEY-7c1d2e"
	fakeHF     = "hf_e2e_fake_9f8e7d"
)

// TestSecretsStayOnTheWorker: an MLRB-contract agent image gets its API
// keys from the worker's env file; the keys reach the agent's environment
// but no workflow history (as the SDK and the official CLI export it), no
// log segment, no checkpoint, no worker log. The agent logs in to Hugging
// Face as huggingface-cli does; the token files it leaves in the cache
// are not checkpointed, the rest of the cache is.
func TestSecretsStayOnTheWorker(t *testing.T) {
	parallel(t)
	e := dockerEnv(t)
	envFile := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY="+fakeOpenAI+"\nHUGGINGFACE_TOKEN="+fakeHF+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.vars = append(e.vars, "MLRB_AGENT_ENV_FILE="+envFile)
	buildEnvImage(t)
	e.addTask("e2e_secret", "mini_baby_lm", nil)
	e.start("worker", "--dev")
	e.waitServer()
	var res result
	e.starterJSON(&res, "run", "--task", "e2e_secret", "--label", "e2e-image", "--image", "mlrb-envtask:e2e", "--provider", "openai",
		"--secret", "HUGGINGFACE_TOKEN", "--seed", "1", "--wait", "--json")
	if res.Outcome != "agent_failed" || res.Score != nil {
		t.Fatalf("an agent that submits nothing: %+v", res)
	}

	logs, errs, code := e.starter("logs", res.RunID)
	if code != 0 {
		t.Fatalf("starter logs: %s", errs)
	}
	for _, want := range []string{"TASK_NAME=e2e_secret", "PROVIDER=openai", "BENCHMARK=mini_benchmark", "OPENAI_API_KEY=[REDACTED]", "HUGGINGFACE_TOKEN=[REDACTED]", "MLRB_ATTEMPT=1"} {
		if !strings.Contains(logs, want) {
			t.Errorf("agent log lacks %q:\n%s", want, logs)
		}
	}

	exported, err := protojson.Marshal(e.history(res.RunID))
	if err != nil {
		t.Fatal(err)
	}
	exported = withPayloads(exported)
	if !bytes.Contains(exported, []byte("HUGGINGFACE_TOKEN")) {
		t.Fatal("the history should name the secret")
	}
	leaks := map[string][]byte{"history": exported, "agent log": []byte(logs)}
	cliExport := withPayloads(e.exportHistory(testenv.Tool(t, "temporal", installTemporal), res.RunID, ""))
	if !bytes.Contains(cliExport, []byte("HUGGINGFACE_TOKEN")) {
		t.Fatal("the CLI's export should name the secret")
	}
	leaks["history exported by the temporal CLI"] = cliExport

	restored := filepath.Join(t.TempDir(), "ws")
	if _, errs, code := e.starter("checkpoint", "restore", res.RunID, restored); code != 0 {
		t.Fatalf("checkpoint restore: %s", errs)
	}
	cache := filepath.Join(restored, "root", ".cache", "huggingface")
	if _, err := os.Stat(filepath.Join(cache, "hub", "weights.bin")); err != nil {
		t.Fatalf("the Hugging Face cache is checkpointed: %v", err)
	}
	for _, f := range []string{"token", "stored_tokens"} {
		if _, err := os.Stat(filepath.Join(cache, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the token file %s was checkpointed (%v)", f, err)
		}
	}
	readFiles(leaks, restored, filepath.Join(e.state, "blobs"), filepath.Join(e.state, "worker.log"))
	holdsNone(t, leaks, fakeOpenAI, fakeHF)
}

// buildEnvImage is an agent image that prints its environment: no
// evaluator in it, so it doubles as a broken evaluator image.
func buildEnvImage(t *testing.T) {
	t.Helper()
	testtaskImage(t, "mlrb-envtask:e2e", "env")
}
