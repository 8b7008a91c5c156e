package model

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFindModel(t *testing.T) {
	ws := t.TempDir()
	mk := func(dir string, age time.Duration) string {
		p := filepath.Join(ws, dir)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(p, "config.json")
		if err := os.WriteFile(cfg, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		ts := time.Now().Add(-age)
		_ = os.Chtimes(cfg, ts, ts)
		return p
	}
	if _, err := FindModel(ws, ws); err == nil {
		t.Fatal("an empty workspace has no model")
	}
	// MLRB's layout: the agent saves under /app/<run id>/; no submission.
	mk("run-42/checkpoints/step-100", time.Hour)
	newest := mk("run-42/final_model", time.Minute)
	if got, err := FindModel(ws, ws); err != nil || got != newest {
		t.Fatalf("FindModel = %q, %v; want the newest HF dir %q", got, err, newest)
	}
	// A reported path wins; one pointing outside the workspace does not.
	reported := mk("output/model", 2*time.Hour)
	if err := os.WriteFile(filepath.Join(ws, "output", "submission.json"), []byte(`{"model_path": "output/model"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := FindModel(ws, ws); got != reported {
		t.Fatalf("FindModel = %q, want the reported %q", got, reported)
	}
	if err := os.WriteFile(filepath.Join(ws, "output", "submission.json"), []byte(`{"model_path": "../../etc"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := FindModel(ws, ws); got != newest {
		t.Fatalf("a path outside the workspace must be ignored, got %q", got)
	}
	// The work dir inside a container snapshot: a reported path is relative
	// to it, and the search still covers the whole snapshot.
	workdir := filepath.Join(ws, "app", "work")
	if err := os.MkdirAll(filepath.Join(workdir, "output"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _ := FindModel(ws, workdir); got != newest {
		t.Fatalf("with no submission in the work dir: %q, want %q", got, newest)
	}
	inWork := mk("app/work/output/best", 3*time.Hour)
	if err := os.WriteFile(filepath.Join(workdir, "output", "submission.json"), []byte(`{"model_path": "output/best"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := FindModel(ws, workdir); got != inWork {
		t.Fatalf("a path reported relative to the work dir: %q, want %q", got, inWork)
	}
}
