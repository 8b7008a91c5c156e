package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/sandbox/runtime"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/bundle"
)

// TestBundleVerifyRescore: a benchmark of the reference image is bundled
// and signed; verify checks every run against the operator's public key
// and exits 1 naming a chunk, the result or the signature when one byte
// of it is flipped; with the worker and its server gone, each bundle is
// re-scored in a new state directory to the same score, and under
// another evaluator image the difference is shown with that evaluator
// named.
func TestBundleVerifyRescore(t *testing.T) {
	parallel(t)
	keys := filepath.Join(t.TempDir(), "operator")
	dir := agentDefs(t, map[string]string{
		// No args: the reference image runs the reference agent by default.
		"ref-img": "image: " + refImage + "\nprovider: openai\nmodel: gpt-4o\n",
		"copier":  "image: mlrb-copyagent:e2e\nprovider: openai\nmodel: gpt-4o\n",
	})
	e := dockerEnv(t, "MLRB_AGENTS_DIR="+dir, "MLRB_CHECKPOINT_INTERVAL=3s", "MLRB_OBSERVE_PROC_INTERVAL=1s", "MLRB_BUNDLE_SIGNING_KEY="+keys)
	if out, errs, code := e.starter("keys", "new", "-o", keys); code != 0 || !strings.Contains(out, keys+".pub") {
		t.Fatalf("keys new (exit %d): %s %s", code, out, errs)
	}
	if _, _, code := e.starter("keys", "new", "-o", keys); code != 2 {
		t.Fatalf("keys new over an existing key: exit %d, want 2", code)
	}
	e.worker = e.start("worker", "--dev")
	e.waitServer()
	copierImage(t, e)
	const b = "bundled"
	if _, errs, code := e.starter("benchmark", "--agents", "ref-img,copier", "--tasks", "mini_baby_lm", "--seeds", "2", "--time-limit", "8s", "--id", b); code != 0 {
		t.Fatalf("benchmark: %s", errs)
	}
	e.awaitBenchmark(b)
	scores := map[string]float64{}
	for _, a := range []string{"ref-img", "copier"} {
		for _, s := range []string{"s1", "s2"} {
			id := b + "/" + a + "/mini_baby_lm/" + s
			var res result
			e.starterJSON(&res, "result", id, "--json")
			if (res.Outcome != "scored" && res.Outcome != "limit_reached") || res.Score == nil {
				t.Fatalf("%s: %+v", id, res)
			}
			scores[id] = *res.Score
		}
	}
	reviewed(t, e, b)
	out := filepath.Join(t.TempDir(), "bundle")
	if so, errs, code := e.starter("bundle", b, "-o", out); code != 0 || strings.Count(so, "bundled "+b+"/") != 4 {
		t.Fatalf("bundle (exit %d): %s %s", code, so, errs)
	}
	hacked, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(blob.RunPrefix(b+"/copier/mini_baby_lm/s1")), "result.json"))
	if err != nil || !bytes.Contains(hacked, []byte(`"outcome":"hacked"`)) || !bytes.Contains(hacked, []byte(`"by":"e2e-reviewer"`)) {
		t.Fatalf("the hacked run's bundle does not carry its verdict: %v %s", err, hacked)
	}
	for id := range scores {
		// The sandbox the agent ran in is part of the signed record.
		pol, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(blob.RunPrefix(id)), "sandbox", "attempt-0001.json"))
		if err != nil || !bytes.Contains(pol, []byte(`"runtime": "docker"`)) || !bytes.Contains(pol, []byte(`seccomp=sha256:`)) || !bytes.Contains(pol, []byte(`"network": "door"`)) {
			t.Fatalf("%s's sandbox policy: %v %s", id, err, pol)
		}
	}
	pub := keys + ".pub"
	so, errs, code := e.starter("verify", out, "--trust", pub)
	if code != 0 || strings.Count(so, "verified "+b+"/") != 4 || !strings.Contains(so, "trusted as "+pub) {
		t.Fatalf("verify (exit %d): %s %s", code, so, errs)
	}
	t.Logf("verify:\n%s", so)
	if _, errs, code := e.starter("verify", out); code != 2 || !strings.Contains(errs, "--trust") {
		t.Fatalf("verify with no --trust key: exit %d, want 2 naming --trust: %s", code, errs)
	}
	if _, errs, code := e.starter("verify", t.TempDir(), "--trust", pub); code != 2 {
		t.Fatalf("verify of a directory that is no bundle: exit %d, want 2: %s", code, errs)
	}
	flipped(t, e, out, pub, b+"/ref-img/mini_baby_lm/s1")

	// No server, no store of the operator's: a new state directory.
	e.worker.stop(t, 30*time.Second)
	fresh := append(slices.Clone(e.vars), "MLRB_DEV_STATE_DIR="+t.TempDir(), "MLRB_TEMPORAL_ADDRESS=127.0.0.1:1")
	so, errs, code = e.starterWith(fresh, "rescore", out, "--trust", pub)
	if code != 0 || strings.Count(so, "agree: exactly") != 4 || !strings.Contains(so, "marked hacked on review by e2e-reviewer") {
		t.Fatalf("rescore (exit %d): %s %s", code, so, errs)
	}
	for id, s := range scores {
		if !regexp.MustCompile(`rescore ` + regexp.QuoteMeta(id) + `\n  bundle: .*\n  here: +score ` + regexp.QuoteMeta(fmt.Sprintf("%.6g", s)) + `,`).MatchString(so) {
			t.Fatalf("rescore of %s does not show %v beside it:\n%s", id, s, so)
		}
	}
	t.Logf("rescore:\n%s", so)
	buildImage(t, "mlrb-othereval:e2e", "mlrb", staticBinary(t, "internal/testkit/e2e/testdata/othereval"), "FROM scratch\nCOPY mlrb /mlrb\nWORKDIR /app\n")
	so, errs, code = e.starterWith(fresh, "rescore", out, "--trust", pub, "--image", "mlrb-othereval:e2e", "--run", b+"/ref-img/mini_baby_lm/s1")
	if code != 0 || !strings.Contains(so, "ANOTHER evaluator: sha256:") || !strings.Contains(so, "under another evaluator") || strings.Contains(so, "agree: exactly") {
		t.Fatalf("rescore under another evaluator (exit %d): %s %s", code, so, errs)
	}
	t.Logf("rescore under another evaluator:\n%s", so)
}

// flipped: one byte flipped in a chunk, in the result or in the
// signature makes verify exit 1 naming that piece; put back, it passes.
func flipped(t *testing.T, e *env, dir, pub, runID string) {
	t.Helper()
	env, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(bundle.EnvelopeKey(runID))))
	if err != nil {
		t.Fatal(err)
	}
	var envelope struct{ Signatures []struct{ Sig string } }
	if err := json.Unmarshal(env, &envelope); err != nil || len(envelope.Signatures) != 1 {
		t.Fatalf("envelope: %v", err)
	}
	chunks, _ := filepath.Glob(filepath.Join(dir, "chunks", "*", "*"))
	if len(chunks) == 0 {
		t.Fatal("the bundle holds no chunk")
	}
	for _, c := range []struct{ file, piece string }{
		{chunks[len(chunks)/2], "chunk chunks/"},
		{filepath.Join(dir, filepath.FromSlash(blob.RunPrefix(runID)), "result.json"), "result.json"},
		{filepath.Join(dir, filepath.FromSlash(bundle.EnvelopeKey(runID))), "(signature)"},
	} {
		orig, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		bad := bytes.Clone(orig)
		i := len(bad) / 2
		if c.piece == "(signature)" {
			i = bytes.Index(bad, []byte(envelope.Signatures[0].Sig)) + 5
		}
		bad[i] ^= 0x01
		if err := os.WriteFile(c.file, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		so, errs, code := e.starter("verify", dir, "--trust", pub)
		if code != 1 || !strings.Contains(errs, c.piece) {
			t.Fatalf("a byte flipped in %s: verify exit %d, want 1 naming %q: %s %s", c.file, code, c.piece, so, errs)
		}
		if err := os.WriteFile(c.file, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, errs, code := e.starter("verify", dir, "--trust", pub); code != 0 {
		t.Fatalf("verify once put back: exit %d: %s", code, errs)
	}
}

// copierImage builds the copying agent's image around a model another
// run made: the reference image's, restored from its final checkpoint.
func copierImage(t *testing.T, e *env) {
	t.Helper()
	var res result
	e.starterJSON(&res, "run", "--agent", "ref-img", "--task", "mini_baby_lm", "--seed", "9", "--time-limit", "8s", "--wait", "--json")
	if res.Score == nil || res.ModelPath == "" {
		t.Fatalf("the run whose model the copier brings: %+v", res)
	}
	ws := t.TempDir()
	if _, errs, code := e.starter("checkpoint", "restore", res.RunID, ws); code != 0 {
		t.Fatalf("checkpoint restore: %s", errs)
	}
	files := map[string]string{"copyagent": staticBinary(t, "internal/testkit/e2e/testdata/copyagent")}
	model := filepath.Join(ws, filepath.FromSlash(res.ModelPath))
	entries, err := os.ReadDir(model)
	if err != nil || len(entries) == 0 {
		t.Fatalf("the restored model %s: %v", model, err)
	}
	for _, en := range entries {
		files["prebuilt/model/"+en.Name()] = filepath.Join(model, en.Name())
	}
	// Weights of a size review compares with the image's files (the mini
	// model's own may be smaller).
	extra := filepath.Join(t.TempDir(), "extra.dat")
	if err := os.WriteFile(extra, bytes.Repeat([]byte("prebuilt weights "), 8<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	files["prebuilt/model/extra.dat"] = extra
	d := docker(t)
	if err := runtime.BuildImage(context.Background(), d, "mlrb-copyagent:e2e", files,
		"FROM scratch\nCOPY copyagent /copyagent\nCOPY prebuilt /prebuilt\nCMD [\"/copyagent\"]\n"); err != nil {
		t.Fatal(err)
	}
}

// reviewed: the copier's runs are flagged with their evidence, the
// reference image's are not; a hacked verdict moves the copier's row.
func reviewed(t *testing.T, e *env, b string) {
	t.Helper()
	var list []struct {
		RunID string `json:"run_id"`
		Flags []struct {
			Kind     string
			What     string
			Evidence []string
		}
	}
	e.starterJSON(&list, "review", b, "--json")
	if len(list) != 4 {
		t.Fatalf("review lists %d runs, want 4", len(list))
	}
	for _, r := range list {
		copier := strings.Contains(r.RunID, "/copier/")
		if copier != (len(r.Flags) > 0) {
			so, _, _ := e.starter("review", b)
			var files []string
			_ = filepath.Walk(filepath.Join(e.state, "blobs", filepath.FromSlash(blob.RunPrefix(r.RunID))), func(p string, _ os.FileInfo, _ error) error {
				files = append(files, p)
				return nil
			})
			log, _ := os.ReadFile(filepath.Join(e.state, "worker.log"))
			var lines []string
			for _, l := range strings.Split(string(log), "\n") {
				if strings.Contains(l, "observ") || strings.Contains(l, "ended before") || strings.Contains(l, "cgroup") {
					lines = append(lines, l)
				}
			}
			t.Fatalf("run %s has %d flags:\n%s\nfiles %v\n%s", r.RunID, len(r.Flags), so, files, strings.Join(lines, "\n"))
		}
		if copier && (r.Flags[0].Kind != "model_without_work" || len(r.Flags[0].Evidence) == 0) {
			t.Fatalf("copier's flag %+v", r.Flags[0])
		}
		// The image brought the weights: the worker found them in it.
		if copier && !slices.ContainsFunc(r.Flags, func(f struct {
			Kind     string
			What     string
			Evidence []string
		}) bool {
			return f.Kind == "weights_copied" && strings.Contains(f.What, "output/model/extra.dat") && strings.Contains(f.What, "/prebuilt/model/extra.dat")
		}) {
			t.Fatalf("the copier's weights are not found in its image: %+v", r.Flags)
		}
	}
	so, _, _ := e.starter("review", b)
	t.Logf("review:\n%s", so)
	if _, errs, code := e.starter("review", "mark", b+"/copier/mini_baby_lm/s1", "--verdict", "maybe", "--note", "x"); code != 2 || !strings.Contains(errs, "--verdict") {
		t.Fatalf("a bad verdict: exit %d: %s", code, errs)
	}
	if so, errs, code := e.starter("review", "mark", b+"/copier/mini_baby_lm/s1", "--verdict", "hacked", "--by", "e2e-reviewer",
		"--note", "its model is another run's, put in place at once"); code != 0 {
		t.Fatalf("review mark (exit %d): %s %s", code, so, errs)
	}
	var res result
	e.starterJSON(&res, "result", b+"/copier/mini_baby_lm/s1", "--json")
	if res.Outcome != "hacked" || res.Score != nil || !strings.Contains(res.Reason, "e2e-reviewer") {
		t.Fatalf("the marked run's result: %+v", res)
	}
	table, _, _ := e.starter("results", b)
	if !regexp.MustCompile(`mini_baby_lm +copier +2 1/1/0 \(1 hacked\)`).MatchString(table) {
		t.Fatalf("the hacked run is not the copier's failure on the leaderboard:\n%s", table)
	}
	rep := t.TempDir()
	if _, errs, code := e.starter("report", b, "-o", rep); code != 0 {
		t.Fatalf("report: %s", errs)
	}
	if idx, err := os.ReadFile(filepath.Join(rep, "index.html")); err != nil || !bytes.Contains(idx, []byte("marked hacked on review by e2e-reviewer")) {
		t.Fatalf("the report does not say why the run failed: %v", err)
	}
}
