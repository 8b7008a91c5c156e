package evaluation

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/scoring/model"
	"github.com/mlrb/mlrb/internal/store/safefs"
	"github.com/mlrb/mlrb/internal/testkit/attack"
	"github.com/mlrb/mlrb/tasks"
)

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
			root, host := attack.Workspace(t)
			modelDir(t, filepath.Join(root, "output", "model"))
			attack.Symlink(t, strings.Replace(target, "HOST", host, 1), filepath.Join(root, "output", "submission.json"))
			_, err := model.FindModel(root, root)
			if !errors.Is(err, safefs.ErrRefused) || !strings.Contains(err.Error(), "symlink") {
				t.Fatalf("FindModel = %v; want a refusal naming the symlink", err)
			}
		})
	}
}

func TestModelDirAsASymlinkToTheHostIsRefused(t *testing.T) {
	root, host := attack.Workspace(t)
	modelDir(t, filepath.Join(host, "weights"))
	attack.Symlink(t, filepath.Join(host, "weights"), filepath.Join(root, "output", "model"))
	if err := os.WriteFile(filepath.Join(root, "output", "submission.json"), []byte(`{"model_path":"output/model"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := model.FindModel(root, root); !errors.Is(err, safefs.ErrRefused) {
		t.Fatalf("FindModel = %q, %v; want a refusal", got, err)
	}
	// Unreported, the search never descends into it either.
	if err := os.Remove(filepath.Join(root, "output", "submission.json")); err != nil {
		t.Fatal(err)
	}
	if got, err := model.FindModel(root, root); err == nil {
		t.Fatalf("the search took %q through a symlink", got)
	}
}

func TestConfigAsASymlinkIsNeverRead(t *testing.T) {
	root, host := attack.Workspace(t)
	dir := filepath.Join(root, "output", "model")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	attack.Symlink(t, "/dev/zero", filepath.Join(dir, "config.json"))
	if got, err := model.FindModel(root, root); err == nil {
		t.Fatalf("a config.json symlink made %q a model", got)
	}
	if err := os.Remove(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	attack.Symlink(t, filepath.Join(host, "secret"), filepath.Join(dir, "config.json"))
	check, err := model.CheckConstraints(dir, &tasks.Spec{Suite: "mini"})
	if check != nil || !errors.Is(err, safefs.ErrRefused) {
		t.Fatalf("%+v, %v: the host file must not be read as the model's config", check, err)
	}
}

func TestWeightsAsASymlinkAreRefused(t *testing.T) {
	root, host := attack.Workspace(t)
	dir := filepath.Join(root, "output", "model")
	modelDir(t, dir)
	attack.Symlink(t, filepath.Join(host, "secret"), filepath.Join(dir, "model.safetensors"))
	if _, err := model.CheckConstraints(dir, &tasks.Spec{}); !errors.Is(err, safefs.ErrRefused) {
		t.Fatalf("%v: want the symlinked weights refused", err)
	}
}

func TestALinkOutOfTheModelDirIsRefused(t *testing.T) {
	root, host := attack.Workspace(t)
	dir := filepath.Join(root, "output", "model")
	modelDir(t, dir)
	// Relative links that stay inside are a model's own business (the HF
	// cache is made of them).
	if err := os.WriteFile(filepath.Join(root, "blob"), []byte("w"), 0o644); err != nil {
		t.Fatal(err)
	}
	attack.Symlink(t, "../../blob", filepath.Join(dir, "weights.bin"))
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
			attack.Symlink(t, host, filepath.Join(root, "output", "hop"))
			attack.Symlink(t, target, link)
			if err := safefs.CheckLinks(root, dir); !errors.Is(err, safefs.ErrRefused) {
				t.Fatalf("CheckLinks = %v; want a refusal", err)
			}
		})
	}
}

// TestUsageOutOfRangeIsNotReported: usage.json is the agent's; infinite,
// negative or absurd figures are dropped, never carried into the run's
// cost (audit #15).
func TestUsageOutOfRangeIsNotReported(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"input_tokens": 1200, "output_tokens": 300, "cost_usd": 2.5}`: true,
		`{"cost_usd": 1e308}`:     false,
		`{"cost_usd": -1000000}`:  false,
		`{"input_tokens": -5}`:    false,
		`{"output_tokens": 1e30}`: false,
	} {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "output"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "output", "usage.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if u := readUsage(snapshot{dir: root, workdir: root}); (u != nil) != ok {
			t.Errorf("%s: usage %+v; want reported %v", body, u, ok)
		}
	}
}
