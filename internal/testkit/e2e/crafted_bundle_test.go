package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ita "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/bundle"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/tasks"
)

// crafted is one verifier's machine and one operator's signed bundle of
// a mini_baby_lm run whose model is junk (it breaks the evaluator, as a
// model out of GPU memory on a smaller machine would): no worker, no
// server, the real starter on a home of the test's.
type crafted struct {
	t                 *testing.T
	e                 *env
	home, dir         string
	keys, pub, runID  string
	vars              []string
	bashrc, bashrcWas string
}

func newCrafted(t *testing.T, spec func(*tasks.Spec)) *crafted {
	t.Helper()
	ctx := context.Background()
	home := t.TempDir()
	c := &crafted{t: t, e: &env{t: t}, home: home, runID: "b/agent/mini_baby_lm/s0", dir: filepath.Join(t.TempDir(), "bundle"),
		keys: filepath.Join(t.TempDir(), "op"), bashrc: filepath.Join(home, ".bashrc"), bashrcWas: "# the verifier's own\n"}
	c.pub = c.keys + ".pub"
	// The default state-dir layout under HOME: the one the audit's
	// relative symlink climbed out of.
	c.vars = []string{"HOME=" + home, "MLRB_DEV_STATE_DIR=" + filepath.Join(home, ".local", "state", "mlrb"), "MLRB_HOST_RUNTIME=process",
		"MLRB_TEMPORAL_ADDRESS=127.0.0.1:1", "MLRB_CONFIG=" + filepath.Join(home, "mlrb.yaml")}
	if err := os.WriteFile(filepath.Join(home, "mlrb.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.bashrc, []byte(c.bashrcWas), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "output", "model"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Weights that pass the task's rules (one float32 tensor) under a
	// config the reference evaluator cannot load: the model breaks it.
	header := `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	weights := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	weights = append(append(weights, header...), 0, 0, 0, 0)
	for name, b := range map[string]string{"output/model/config.json": `{"kind":"lm"}`, "output/model/model.safetensors": string(weights), "m/r": "echo pwned-by-bundle\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := checkpoint.New(store, checkpoint.Options{})
	if _, err := e.Save(ctx, ws, checkpoint.Meta{RunID: c.runID, Seq: 1, Attempt: 1, Final: true}, nil); err != nil {
		t.Fatal(err)
	}
	score := 0.61
	res, _ := json.Marshal(map[string]any{"run_id": c.runID, "task": "mini_baby_lm", "agent": "agent", "outcome": "scored", "score": score, "final_checkpoint": 1})
	if err := store.Put(ctx, blob.RunPrefix(c.runID)+"result.json", bytes.NewReader(res)); err != nil {
		t.Fatal(err)
	}
	cat, err := tasks.Load("")
	if err != nil {
		t.Fatal(err)
	}
	s, err := cat.Get("mini_baby_lm")
	if err != nil {
		t.Fatal(err)
	}
	signed := *s
	if spec != nil {
		spec(&signed)
	}
	if _, err := bundle.NewKeys(c.keys); err != nil {
		t.Fatal(err)
	}
	signer, err := bundle.LoadSigner(c.keys)
	if err != nil {
		t.Fatal(err)
	}
	w := &bundle.Writer{Dir: c.dir, Store: store, Signer: signer, Parallel: 2}
	if _, err := w.Run(ctx, bundle.Input{RunID: c.runID, Final: 1, Task: &signed, Agent: "agent", Evaluator: "builtin reference-eval",
		Predicate: bundle.Predicate{Task: signed.ID, SpecHash: signed.Hash(), Agent: "agent", Evaluator: "builtin reference-eval"}}); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *crafted) starter(args ...string) (string, string, int) {
	c.t.Helper()
	return c.e.starterWith(c.vars, args...)
}

// untouched fails the test if the verifier's home changed.
func (c *crafted) untouched() {
	c.t.Helper()
	if b, err := os.ReadFile(c.bashrc); err != nil || string(b) != c.bashrcWas {
		c.t.Fatalf("the verifier's ~/.bashrc now holds %q (%v)", b, err)
	}
}

// escape is audit C1's manifest: the run's own entries, then a hard link
// below m/p and a symlink m/p to the verifier's home.
func (c *crafted) escape(m *checkpoint.Manifest) []byte {
	c.t.Helper()
	m.Files = append(m.Files,
		checkpoint.File{Path: "m/p/.bashrc", Mode: 0o644, HardLink: "m/r"},
		checkpoint.File{Path: "m/p", Mode: fs.ModeSymlink | 0o777, Link: c.home})
	b, err := json.Marshal(m)
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// manifest is the bundled final manifest, decoded.
func (c *crafted) manifest() (string, *checkpoint.Manifest) {
	c.t.Helper()
	key := checkpoint.ManifestKey(c.runID, 1)
	b, err := os.ReadFile(filepath.Join(c.dir, filepath.FromSlash(key)))
	if err != nil {
		c.t.Fatal(err)
	}
	var m checkpoint.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatal(err)
	}
	return key, &m
}

// resign replaces files of the bundle and signs its statement again with
// the operator's key over the new bytes: a signer's own tool.
func (c *crafted) resign(files map[string][]byte) {
	c.t.Helper()
	envKey := filepath.Join(c.dir, filepath.FromSlash(bundle.EnvelopeKey(c.runID)))
	raw, err := os.ReadFile(envKey)
	if err != nil {
		c.t.Fatal(err)
	}
	var env dsse.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		c.t.Fatal(err)
	}
	payload, err := env.DecodeB64Payload()
	if err != nil {
		c.t.Fatal(err)
	}
	var st ita.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		c.t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(c.dir, filepath.FromSlash(name)), b, 0o644); err != nil {
			c.t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		for _, s := range st.Subject {
			if s.Name == name {
				s.Digest["sha256"] = hex.EncodeToString(sum[:])
				s.Annotations, _ = structpb.NewStruct(map[string]any{"mlrb.size": len(b)})
			}
		}
	}
	stmt, err := protojson.Marshal(&st)
	if err != nil {
		c.t.Fatal(err)
	}
	signer, err := bundle.LoadSigner(c.keys)
	if err != nil {
		c.t.Fatal(err)
	}
	es, err := dsse.NewEnvelopeSigner(signer)
	if err != nil {
		c.t.Fatal(err)
	}
	signed, err := es.SignPayload(context.Background(), bundle.PayloadType, stmt)
	if err != nil {
		c.t.Fatal(err)
	}
	out, _ := json.Marshal(signed)
	if err := os.WriteFile(envKey, out, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// TestCraftedBundles (audit C1, H1): a bundle is untrusted input on the
// verifier's machine, each attack through the real starter as the audit
// ran it:
//   - a manifest, signed, that places a hard link through a symlink of
//     its own: verify and rescore refuse it, the verifier's home untouched;
//   - files added beside a signed bundle (a control, another run's
//     manifest escaping as above, its chunk): verify passes what was
//     signed, rescore reads none of the rest and runs no control;
//   - a signed evaluation command that writes on the host: rescore runs
//     only its own catalog's evaluator, and refuses to run any evaluator
//     unsandboxed unless told it is mlrb's own.
func TestCraftedBundles(t *testing.T) {
	parallel(t)
	t.Run("signed escape", func(t *testing.T) {
		t.Parallel()
		c := newCrafted(t, nil)
		key, m := c.manifest()
		c.resign(map[string][]byte{key: c.escape(m)})
		if out, errs, code := c.starter("verify", c.dir, "--trust", c.pub); code != 1 || !strings.Contains(out+errs, "checkpoints/00000001.json") || !strings.Contains(out+errs, "symlink") {
			t.Fatalf("verify of a signed escaping manifest (exit %d): %s %s", code, out, errs)
		}
		if out, errs, code := c.starter("rescore", c.dir, "--trust", c.pub, "--evaluator", "builtin"); code != 1 {
			t.Fatalf("rescore of a signed escaping manifest (exit %d): %s %s", code, out, errs)
		}
		c.untouched()
	})
	t.Run("files added beside", func(t *testing.T) {
		t.Parallel()
		c := newCrafted(t, nil)
		_, m := c.manifest()
		m.RunID = "evil"
		add := map[string][]byte{
			"controls/mini_baby_lm/evil.json":         []byte(`{"run_id":"evil","seq":1,"model":"output/model"}`),
			checkpoint.ManifestKey("evil", 1):         c.escape(m),
			"anchors/mini_baby_lm/baseline/evil.json": []byte(`{"run_id":"evil"}`),
		}
		for k, b := range add {
			p := filepath.Join(c.dir, filepath.FromSlash(k))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if out, errs, code := c.starter("verify", c.dir, "--trust", c.pub); code != 0 {
			t.Fatalf("verify of what was signed (exit %d): %s %s", code, out, errs)
		}
		out, errs, code := c.starter("rescore", c.dir, "--trust", c.pub, "--evaluator", "builtin")
		if code != 1 || !strings.Contains(out, "DISAGREE") || strings.Contains(out+errs, "control") {
			t.Fatalf("rescore of a junk model beside added files (exit %d): %s %s", code, out, errs)
		}
		t.Logf("rescore:\n%s", out)
		c.untouched()
	})
	t.Run("signed command", func(t *testing.T) {
		t.Parallel()
		marker := filepath.Join(t.TempDir(), "ran")
		c := newCrafted(t, func(s *tasks.Spec) {
			s.Evaluation.Command = []string{"sh", "-c", "id > " + marker + "; exit 3"}
		})
		if out, errs, code := c.starter("verify", c.dir, "--trust", c.pub); code != 0 {
			t.Fatalf("verify (exit %d): %s %s", code, out, errs)
		}
		if out, errs, code := c.starter("rescore", c.dir, "--trust", c.pub); code != 2 || !strings.Contains(errs, "host.runtime") || !strings.Contains(errs, "--evaluator builtin") {
			t.Fatalf("rescore under host.runtime process with no --evaluator (exit %d, want 2 naming the runtime and the flag): %s %s", code, out, errs)
		}
		out, errs, code := c.starter("rescore", c.dir, "--trust", c.pub, "--evaluator", "builtin")
		if code != 1 || !strings.Contains(out, "NOT COMPARED") || !strings.Contains(out, "scored otherwise than this starter's catalog") {
			t.Fatalf("rescore of a bundle naming its own command (exit %d): %s %s", code, out, errs)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the bundle's evaluation command ran on the verifier's host")
		}
	})
}
