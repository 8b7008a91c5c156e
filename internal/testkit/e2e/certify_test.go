package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/process/certify"
	"github.com/mlrb/mlrb/internal/sandbox/runtime"
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

// certifyJSON runs `starter certify` and reads its certificate.
func (e *env) certifyJSON(agent string, args ...string) (*certify.Certificate, string, int) {
	e.t.Helper()
	out, errs, code := e.starter(append([]string{"certify", agent, "--json"}, args...)...)
	var c certify.Certificate
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		e.t.Fatalf("certify %s (exit %d): %v\n%s\n%s", agent, code, err, out, errs)
	}
	return &c, errs, code
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
	e := dockerEnv(t, "MLRB_AGENTS_DIR="+agentDefs(t, defs))
	e.timeout = 10 * time.Minute
	var wg sync.WaitGroup
	certs := map[string]*certify.Certificate{}
	var mu sync.Mutex
	for name := range defs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			c, errs, code := e.certifyJSON(name, "--time-limit", "45s", "--deadline", "8s", "--extend-by", "30s")
			t.Logf("certify %s: exit %d in %s: %s\n%s", name, code, time.Since(start).Round(time.Second), c.Line(), errs)
			mu.Lock()
			certs[name] = c
			mu.Unlock()
		}()
	}
	wg.Wait()
	if c := certs["cert-ref"]; !c.Passed() || c.Line() != "5/5 passed" {
		t.Errorf("the reference image: %s: %+v", c.Line(), c.Checks)
	}
	for mode, want := range fails {
		c := certs["cert-"+mode]
		for _, ch := range c.Checks {
			bad := ch.Status == certify.Fail
			if bad != (ch.Name == want.check) || (bad && !strings.Contains(ch.Summary, want.says)) {
				t.Errorf("cert-%s: check %s is %s (%s); want only %s to fail, saying %q; evidence %v", mode, ch.Name, ch.Status, ch.Summary, want.check, want.says, ch.Evidence)
			}
		}
	}
	out, _, _ := e.starter("agents", "list")
	if !strings.Contains(out, "5/5 passed") || !strings.Contains(out, "4/5 passed (failed: resume)") {
		t.Errorf("agents list shows no certificates:\n%s", out)
	}
}
