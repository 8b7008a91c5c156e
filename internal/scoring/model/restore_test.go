package model

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// An evaluation restores what it reads: the agent's reports and the
// model directory they name, never the rest of a workspace; a model
// directory with a link in it, or none named, restores everything, and
// FindModel finds the same model either way.
func TestRestoreOnlyWhatTheEvaluationReads(t *testing.T) {
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := checkpoint.New(store, checkpoint.Options{ChunkSize: 1 << 20})
	for name, c := range map[string]struct {
		submission string
		link       bool
		whole      bool
		readOnly   bool
	}{
		"named":            {`{"model_path":"output/model"}`, false, false, false},
		"named, read-only": {`{"model_path":"output/model"}`, false, false, true},
		"a link in it":     {`{"model_path":"output/model"}`, true, true, false},
		"none named":       {"", false, true, false},
		"named outside":    {`{"model_path":"../../etc"}`, false, true, false},
		"named, not there": {`{"model_path":"output/gone"}`, false, true, false},
	} {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			files := map[string]string{
				"app/work/output/model/config.json": `{"model_type":"mlrb-ngram"}`,
				"app/work/output/model/model.json":  `{"order":1}`,
				"app/work/output/usage.json":        `{"input_tokens":1}`,
				"app/work/data/junk.bin":            strings.Repeat("j", 1<<20),
			}
			if c.submission != "" {
				files["app/work/output/submission.json"] = c.submission
			}
			for p, body := range files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(ws, p), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.link {
				if err := os.Symlink("../../data/junk.bin", filepath.Join(ws, "app/work/output/model/weights.bin")); err != nil {
					t.Fatal(err)
				}
			}
			if c.readOnly {
				// The agent's output dir, read-only: a restore sets it so
				// only once what is below is written.
				if err := os.Chmod(filepath.Join(ws, "app/work/output"), 0o555); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = os.Chmod(filepath.Join(ws, "app/work/output"), 0o755) })
			}
			m, err := e.Save(context.Background(), ws, checkpoint.Meta{RunID: "r/" + name, Seq: 1, Attempt: 1, Workdir: "app/work"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(t.TempDir(), "root")
			var told int64
			whole, err := Restore(context.Background(), e, m, root, func(n int64) { told = n })
			if err != nil || whole != c.whole {
				t.Fatalf("whole = %v, %v; want %v", whole, err, c.whole)
			}
			_, junk := os.Stat(filepath.Join(root, "app/work/data/junk.bin"))
			if (junk == nil) != c.whole || (!c.whole && told >= 1<<20) {
				t.Fatalf("the rest of the workspace restored: %v, %d bytes told", junk == nil, told)
			}
			if _, err := os.Stat(filepath.Join(root, "app/work/output/usage.json")); err != nil {
				t.Fatalf("the agent's usage report: %v", err)
			}
			if c.readOnly {
				if st, err := os.Stat(filepath.Join(root, "app/work/output")); err != nil || st.Mode().Perm() != 0o555 {
					t.Fatalf("the output dir restored: %v, %v", st, err)
				}
				t.Cleanup(func() { _ = os.Chmod(filepath.Join(root, "app/work/output"), 0o755) })
			}
			dir, err := FindModel(root, filepath.Join(root, "app", "work"))
			if err != nil || filepath.Base(dir) != "model" {
				t.Fatalf("FindModel = %q, %v", dir, err)
			}
		})
	}
}
