package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/fleet/hosts"
	"github.com/mlrb/mlrb/internal/results/certificate"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/testkit/llmfake"
)

const certImage = "mlrb-certagent:e2e"

// buildCertImage builds the agents that break the contract on purpose
// (testdata/certagent), with a /tmp to write outside the workspace in.
func buildCertImage(t *testing.T) {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("busybox (Debian's busybox-static) is needed for the certify test's image")
	}
	buildMu.Lock()
	_, done := built[certImage]
	buildMu.Unlock()
	if done {
		return
	}
	agent := staticBinary(t, "internal/testkit/e2e/testdata/certagent")
	d := docker(t)
	buildMu.Lock()
	defer buildMu.Unlock()
	if err := runtime.BuildImage(context.Background(), d, certImage, map[string]string{"busybox": bb, "certagent": agent},
		"FROM scratch\nCOPY busybox /bin/busybox\nCOPY certagent /certagent\nRUN [\"/bin/busybox\", \"mkdir\", \"-m\", \"1777\", \"/tmp\"]\nCMD [\"/certagent\"]\n"); err != nil {
		t.Fatal(err)
	}
	built[certImage] = ""
}

// certifyJSON runs `starter certify` and reads its certificate; it may
// run beside others, so it reports, never fails the test itself.
func (e *env) certifyJSON(agent string, args ...string) (*certificate.Certificate, string, int, error) {
	out, errs, code := e.starter(append([]string{"certify", agent, "--json"}, args...)...)
	var c certificate.Certificate
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		return nil, errs, code, fmt.Errorf("certify %s (exit %d): %w\n%s\n%s", agent, code, err, out, errs)
	}
	return &c, errs, code, nil
}

// TestCertify: `starter certify` of the reference image passes every
// check; each agent that breaks the contract on purpose fails exactly
// its check, naming the evidence; `starter agents list` shows each
// certificate.
func TestCertify(t *testing.T) {
	parallel(t)
	buildCertImage(t)
	defs := map[string]string{"cert-ref": "image: " + refImage + "\nprovider: openai\nmodel: gpt-4o\nargs: [/mlrb, reference-agent]\n"}
	fails := map[string]struct{ check, says string }{
		"startover":  {"resume", "it starts over on a restored workspace"},
		"nosigterm":  {"sigterm", "ignored SIGTERM"},
		"outside":    {"plain", "wrote outside the workspace and its declared state paths: /tmp/certagent/memory.txt"},
		"nodeadline": {"extend", "it does not read MLRB_DEADLINE_FILE"},
	}
	for mode := range fails {
		defs["cert-"+mode] = "image: " + certImage + "\nprovider: openai\nmodel: gpt-4o\nenv: {CERTAGENT_MODE: " + mode + "}\n"
	}
	// The same memory outside the workspace, declared: checkpointed with
	// it, so the agent keeps the contract.
	defs["cert-declared"] = defs["cert-outside"] + "state_paths: [/tmp/certagent]\n"
	// mlrb's LLM agent on a scripted model: a baseline trained, a long
	// job waited on until it ends (or is lost to a crash), the model
	// submitted; every scenario's run follows it.
	script := &llmfake.Script{Next: func(pos int, body []byte) (llmfake.Turn, error) {
		texts := llmfake.Texts(body)
		switch {
		case pos == 0:
			return llmfake.Turn{Calls: []llmfake.ToolCall{{Name: "shell", Args: map[string]any{"command": "mlrb train --out output/model"}}}}, nil
		case pos == 1:
			return llmfake.Turn{Calls: []llmfake.ToolCall{{Name: "job_start", Args: map[string]any{"command": "sleep 15; echo epoch done"}}}}, nil
		case strings.Contains(texts, "job-1 exited") || strings.Contains(texts, "job job-1 was running and is gone"):
			return llmfake.Turn{Calls: []llmfake.ToolCall{{Name: "submit", Args: map[string]any{"model_dir": "output/model", "done": true}}}}, nil
		}
		return llmfake.Turn{Calls: []llmfake.ToolCall{{Name: "job_check", Args: map[string]any{"id": "job-1", "wait_s": 120}}}}, nil
	}}
	provider := scriptedProvider(t, script)
	buildBusyboxImage(t, researcherImage, "researcher.Dockerfile")
	defs["cert-researcher"] = "image: " + researcherImage + "\nprovider: openai\nmodel: gpt-4o\nargs: [/mlrb, researcher]\n"
	e := dockerEnv(t, provider.vars("MLRB_AGENTS_DIR="+agentDefs(t, defs))...)
	e.timeout = 10 * time.Minute
	var wg sync.WaitGroup
	certs := map[string]*certificate.Certificate{}
	var mu sync.Mutex
	var failed []error
	for name := range defs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			c, errs, code, err := e.certifyJSON(name, "--time-limit", "45s", "--deadline", "8s", "--extend-by", "30s")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
				return
			}
			t.Logf("certify %s: exit %d in %s: %s\n%s", name, code, time.Since(start).Round(time.Second), c.Line(), errs)
			certs[name] = c
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatal(errors.Join(failed...))
	}
	for _, name := range []string{"cert-ref", "cert-researcher", "cert-declared"} {
		if c := certs[name]; !c.Passed() || c.Line() != "5/5 passed" {
			t.Errorf("%s: %s: %+v", name, c.Line(), c.Checks)
		}
	}
	if err := script.Err(); err != nil {
		t.Errorf("the scripted model: %v", err)
	}
	for mode, want := range fails {
		c := certs["cert-"+mode]
		for _, ch := range c.Checks {
			bad := ch.Status == certificate.Fail
			if bad != (ch.Name == want.check) || (bad && !strings.Contains(ch.Summary, want.says)) {
				t.Errorf("cert-%s: check %s is %s (%s); want only %s to fail, saying %q; evidence %v", mode, ch.Name, ch.Status, ch.Summary, want.check, want.says, ch.Evidence)
			}
		}
	}
	// A benchmark's leaderboard shows each agent's certificate, and each
	// run's record (so its bundle) carries it.
	e.start("worker", "--dev")
	e.waitServer()
	const b = "certified-bench"
	if _, errs, code := e.starter("benchmark", "--agents", "cert-ref,cert-startover", "--tasks", "mini_baby_lm", "--seeds", "1", "--time-limit", "20s", "--id", b); code != 0 {
		t.Fatalf("benchmark: %s", errs)
	}
	e.awaitBenchmark(b)
	board, errs, code := e.starter("results", b)
	if code != 0 || !strings.Contains(board, "5/5 passed") || !strings.Contains(board, "4/5 passed (failed: resume)") {
		t.Errorf("the leaderboard shows no certificates (exit %d):\n%s%s", code, board, errs)
	}
	fsStore, err := blob.NewFS(filepath.Join(e.state, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := blob.ReadAll(context.Background(), fsStore, certificate.RecordKey(b+"/cert-ref/mini_baby_lm/s1"), 1<<20)
	var kept certificate.Certificate
	if err != nil || json.Unmarshal(rec, &kept) != nil || kept.DefinitionHash != certs["cert-ref"].DefinitionHash || !kept.Passed() {
		t.Errorf("the run's record carries no certificate of its definition: %v %s", err, rec)
	}
	out, _, _ := e.starter("agents", "list")
	if !strings.Contains(out, "5/5 passed") || !strings.Contains(out, "4/5 passed (failed: resume)") {
		t.Errorf("agents list shows no certificates:\n%s", out)
	}
	// Each certification's worker lived for it alone: its host's record
	// went with it.
	recs, err := hosts.List(context.Background(), fsStore)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if strings.HasPrefix(r.ID, "certify-") {
			t.Errorf("certify left its worker's host record %s (stopped %v)", r.ID, r.Stopped)
		}
	}
}
