package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mlrb/mlrb/tasks"
)

func mkfifo(p string) error { return unix.Mkfifo(p, 0o644) }

// TestAnAdapterIsARuleViolation (audit N2): a 4,096-parameter model whose
// adapter_config.json names a 9e9-parameter base that transformers would
// load is not passed on the small weights: loading more than was checked
// is a violation, and so is remote code.
func TestAnAdapterIsARuleViolation(t *testing.T) {
	spec := &tasks.Spec{Suite: "full", Constraints: tasks.Constraints{MaxParams: 8_600_000_000, AllowedDtypes: []string{"float32"}}}
	dir := writeModel(t, map[string]any{"model_type": "llama"}, "F32", map[string][]int64{"w": {64, 64}})
	if c, err := CheckConstraints(dir, spec); err != nil || len(c.Violations) != 0 {
		t.Fatalf("the small model alone: %+v %v", c, err)
	}
	big := writeModel(t, map[string]any{"model_type": "llama"}, "F32", map[string][]int64{"w": {90000, 100000}})
	if err := os.Rename(big, filepath.Join(dir, "big")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(`{"base_model_name_or_path":"/model/big","peft_type":"LORA"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := CheckConstraints(dir, spec)
	if err != nil || len(c.Violations) != 1 || !strings.Contains(c.Violations[0], "adapter_config.json makes the loader load another model") {
		t.Fatalf("with an adapter: %+v %v", c, err)
	}
	remote := writeModel(t, map[string]any{"model_type": "llama", "auto_map": map[string]string{"AutoModel": "mine.Model"}}, "F32", map[string][]int64{"w": {4, 4}})
	if c, err := CheckConstraints(remote, spec); err != nil || len(c.Violations) != 1 || !strings.Contains(c.Violations[0], "auto_map") {
		t.Fatalf("remote code: %+v %v", c, err)
	}
}

// TestSealedModel (audit N5): the evaluator gets a copy of the model dir
// with regular files only: a link inside the workspace (a Hugging Face
// cache's snapshot) becomes the file it leads to; a link that leads
// nowhere here (model.json -> ../dev/zero, /dev/zero in the evaluator's
// container), a link to a directory and a device are refused.
func TestSealedModel(t *testing.T) {
	ws := t.TempDir()
	blobs, model := filepath.Join(ws, "blobs"), filepath.Join(ws, "snapshots", "abc")
	for _, d := range []string{blobs, filepath.Join(model, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(blobs, "h1"), []byte("weights"), 0o644))
	must(os.WriteFile(filepath.Join(model, "config.json"), []byte("{}"), 0o644))
	must(os.Symlink("../../blobs/h1", filepath.Join(model, "model.safetensors")))
	must(os.WriteFile(filepath.Join(model, "sub", "tokenizer.json"), []byte("{}"), 0o644))
	sealed := filepath.Join(t.TempDir(), "model")
	must(Seal(model, sealed))
	st, err := os.Lstat(filepath.Join(sealed, "model.safetensors"))
	if err != nil || !st.Mode().IsRegular() {
		t.Fatalf("the linked weights in the sealed copy: %v %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(sealed, "model.safetensors")); string(b) != "weights" {
		t.Fatalf("sealed weights %q", b)
	}
	if _, err := os.Stat(filepath.Join(sealed, "sub", "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	for name, make := range map[string]func(p string) error{
		"dangling": func(p string) error { return os.Symlink("../dev/zero", p) },
		"to a dir": func(p string) error { return os.Symlink("sub", p) },
		"absolute": func(p string) error { return os.Symlink("/nonexistent-in-host/zero", p) },
		"a pipe":   func(p string) error { return mkfifo(p) },
	} {
		t.Run(name, func(t *testing.T) {
			m := t.TempDir()
			must(os.MkdirAll(filepath.Join(m, "sub"), 0o755))
			must(make(filepath.Join(m, "model.json")))
			if err := Seal(m, filepath.Join(t.TempDir(), "model")); err == nil {
				t.Fatal("sealed")
			}
		})
	}
}
