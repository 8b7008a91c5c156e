// The model an agent left: found in its output, its small files read bounded.

// Package model is what the worker reads of the model an agent left: where
// it is (FindModel: the reported path, else the newest Hugging Face model
// dir) and what it is (CheckConstraints: the parameters, bytes and dtypes
// of the very weights the loader will load, against the task's rules).
// The tree is the agent's: every name is resolved inside it from
// descriptors, never through a link (internal/store/safefs).
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

// MaxReport caps what is read of the small files an agent leaves for the
// worker (submission.json, usage.json, config.json).
const MaxReport = 1 << 20

// FindModel returns the model dir in a restored snapshot: the path the
// agent reported in <workdir>/output/submission.json (relative to the
// work dir, or absolute in the agent's own view of the snapshot, as
// /app/<id>/model in a container), else the newest directory anywhere in
// the snapshot holding a config.json (a Hugging Face model dir; MLRB's
// agents save under /app/<id>/, outside MLRB_WORKDIR). What the agent
// left is data: a path is resolved inside root, never through a symlink,
// or refused with the reason.
func FindModel(root, workdir string) (string, error) {
	wrel, err := filepath.Rel(root, workdir)
	if err != nil {
		return "", fmt.Errorf("work dir %s is not in %s", workdir, root)
	}
	b, err := safefs.ReadFile(root, filepath.Join(wrel, contract.OutputDir, contract.SubmissionFile), MaxReport)
	switch {
	case errors.Is(err, safefs.ErrRefused):
		return "", err
	case err == nil:
		var sub contract.Submission
		if json.Unmarshal(b, &sub) == nil && sub.ModelPath != "" {
			rel := filepath.Join(wrel, filepath.FromSlash(sub.ModelPath))
			if strings.HasPrefix(sub.ModelPath, "/") {
				rel = strings.TrimPrefix(filepath.Clean(filepath.FromSlash(sub.ModelPath)), string(filepath.Separator))
			}
			// A path out of the workspace is ignored (the search below
			// may find the model); one through a symlink is refused.
			p, err := safefs.DirPath(root, rel)
			if errors.Is(err, safefs.ErrRefused) && !errors.Is(err, safefs.ErrOutside) {
				return "", fmt.Errorf("model_path %q: %w", sub.ModelPath, err)
			}
			if err == nil {
				return p, nil
			}
		}
	}
	best, err := newestConfigDir(root)
	if err != nil {
		return "", fmt.Errorf("search for a model: %w", err)
	}
	if best == "" {
		return "", errors.New("no model: no output/submission.json and no directory with a config.json in the workspace")
	}
	return best, nil
}

// newestConfigDir is the directory under root holding the newest regular
// config.json ("" if none), walked from descriptors.
func newestConfigDir(root string) (string, error) {
	d, err := safefs.OpenDir(root)
	if err != nil {
		return "", err
	}
	defer func() { _ = d.Close() }()
	var best string
	var bestTime int64
	err = d.Walk(func(e safefs.Entry) error {
		if e.Name != "config.json" || !e.Mode().IsRegular() {
			return nil
		}
		if t := e.Stat.Mtim.Nano(); best == "" || t > bestTime {
			best, bestTime = filepath.Join(root, filepath.FromSlash(path.Dir(e.Rel))), t
		}
		return nil
	})
	return best, err
}

func dirBytes(dir string) int64 {
	d, err := safefs.OpenDir(dir)
	if err != nil {
		return 0
	}
	defer func() { _ = d.Close() }()
	var total int64
	_ = d.Walk(func(e safefs.Entry) error {
		if e.Mode().IsRegular() {
			total += e.Stat.Size
		}
		return nil
	})
	return total
}
