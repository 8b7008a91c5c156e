package activities

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/safefs"
	"github.com/mlrb/mlrb/tasks"
)

// A workspace an attacker left: every test builds one and checks that
// the worker refuses it with a reason, without reading, following or
// mounting anything outside it.
func attackWorkspace(t *testing.T) (root, host string) {
	t.Helper()
	root = t.TempDir()
	host = t.TempDir() // stands for the host's own files
	if err := os.WriteFile(filepath.Join(host, "secret"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "output"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root, host
}

func symlink(t *testing.T, target, at string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, at); err != nil {
		t.Fatal(err)
	}
}

func modelDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"num_parameters": 7}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSubmissionAsASymlinkIsRefused(t *testing.T) {
	for _, target := range []string{"/dev/zero", "HOST/secret"} {
		t.Run(target, func(t *testing.T) {
			root, host := attackWorkspace(t)
			modelDir(t, filepath.Join(root, "output", "model"))
			symlink(t, strings.Replace(target, "HOST", host, 1), filepath.Join(root, "output", "submission.json"))
			_, err := FindModel(root, root)
			if !errors.Is(err, safefs.ErrRefused) || !strings.Contains(err.Error(), "symlink") {
				t.Fatalf("FindModel = %v; want a refusal naming the symlink", err)
			}
		})
	}
}

func TestModelDirAsASymlinkToTheHostIsRefused(t *testing.T) {
	root, host := attackWorkspace(t)
	modelDir(t, filepath.Join(host, "weights"))
	symlink(t, filepath.Join(host, "weights"), filepath.Join(root, "output", "model"))
	if err := os.WriteFile(filepath.Join(root, "output", "submission.json"), []byte(`{"model_path":"output/model"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := FindModel(root, root); !errors.Is(err, safefs.ErrRefused) {
		t.Fatalf("FindModel = %q, %v; want a refusal", got, err)
	}
	// Unreported, the search never descends into it either.
	if err := os.Remove(filepath.Join(root, "output", "submission.json")); err != nil {
		t.Fatal(err)
	}
	if got, err := FindModel(root, root); err == nil {
		t.Fatalf("the search took %q through a symlink", got)
	}
}

func TestConfigAsASymlinkIsNeverRead(t *testing.T) {
	root, host := attackWorkspace(t)
	dir := filepath.Join(root, "output", "model")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "/dev/zero", filepath.Join(dir, "config.json"))
	if got, err := FindModel(root, root); err == nil {
		t.Fatalf("a config.json symlink made %q a model", got)
	}
	if err := os.Remove(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	symlink(t, filepath.Join(host, "secret"), filepath.Join(dir, "config.json"))
	params, violations := CheckConstraints(dir, tasks.Constraints{})
	if params != 0 || len(violations) == 0 {
		t.Fatalf("params %d, violations %v: the host file must not be read as the model's config", params, violations)
	}
}

func TestWeightsAsASymlinkAreRefused(t *testing.T) {
	root, host := attackWorkspace(t)
	dir := filepath.Join(root, "output", "model")
	modelDir(t, dir)
	symlink(t, filepath.Join(host, "secret"), filepath.Join(dir, "model.safetensors"))
	_, violations := CheckConstraints(dir, tasks.Constraints{})
	if len(violations) != 1 || !strings.Contains(violations[0], "refused") {
		t.Fatalf("violations %v: want the symlinked weights refused", violations)
	}
}

func TestALinkOutOfTheModelDirIsRefused(t *testing.T) {
	root, host := attackWorkspace(t)
	dir := filepath.Join(root, "output", "model")
	modelDir(t, dir)
	// Relative links that stay inside are a model's own business (the HF
	// cache is made of them).
	if err := os.WriteFile(filepath.Join(root, "blob"), []byte("w"), 0o644); err != nil {
		t.Fatal(err)
	}
	symlink(t, "../../blob", filepath.Join(dir, "weights.bin"))
	if err := safefs.CheckLinks(root, dir); err != nil {
		t.Fatalf("a link inside the workspace: %v", err)
	}
	for name, target := range map[string]string{
		"absolute":        filepath.Join(host, "secret"),
		"climbing out":    "../../../../../../../../" + strings.TrimPrefix(filepath.Join(host, "secret"), "/"),
		"through a chain": "../hop/secret",
	} {
		t.Run(name, func(t *testing.T) {
			link := filepath.Join(dir, "tokenizer.json")
			_ = os.Remove(link)
			_ = os.Remove(filepath.Join(root, "output", "hop"))
			symlink(t, host, filepath.Join(root, "output", "hop"))
			symlink(t, target, link)
			if err := safefs.CheckLinks(root, dir); !errors.Is(err, safefs.ErrRefused) {
				t.Fatalf("CheckLinks = %v; want a refusal", err)
			}
		})
	}
}
