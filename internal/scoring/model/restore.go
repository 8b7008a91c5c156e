// Restore lays out in root what an evaluation of checkpoint m reads.

package model

import (
	"context"
	"encoding/json"
	"io/fs"
	"path"
	"strings"

	"github.com/mlrb/mlrb/internal/run/contract"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
)

// Restore lays out in root what an evaluation of checkpoint m reads:
// when the agent's submission (output/submission.json, read from its
// chunks first) names a model directory that m holds as one, with no
// symbolic link in it, that directory and the agent's reports alone;
// otherwise the whole workspace. One restore either way, so that the
// directories' modes (the agent's to choose) are set after everything
// below them is written. An evaluation reads nothing else (the evaluator
// gets a sealed copy of the model), so a 20 GB workspace with a 1 GB
// model restores 1 GB before the evaluator starts; FindModel then finds
// the same directory in either tree. whole says which was restored;
// bytes is told how much, before the restore (for progress).
func Restore(ctx context.Context, e *checkpoint.Engine, m *checkpoint.Manifest, root string, bytes func(int64)) (whole bool, err error) {
	out := path.Join(m.Workdir, contract.OutputDir)
	submission, usage := path.Join(out, contract.SubmissionFile), path.Join(out, contract.UsageFile)
	if dir := namedModel(ctx, e, m, submission); dir != "" {
		narrow := m.Only(submission, usage, dir)
		bytes(narrow.Bytes)
		return false, e.Restore(ctx, narrow, root)
	}
	bytes(m.Bytes)
	return true, e.Restore(ctx, m, root)
}

// namedModel is the model directory the submission names, as a path of
// m, when m holds it as a directory with no symlink in it ("": none such,
// restore the whole workspace and let FindModel search).
func namedModel(ctx context.Context, e *checkpoint.Engine, m *checkpoint.Manifest, submission string) string {
	b, err := e.ReadFile(ctx, m, submission, MaxReport)
	if err != nil {
		return ""
	}
	var sub contract.Submission
	if json.Unmarshal(b, &sub) != nil || sub.ModelPath == "" || strings.HasPrefix(sub.ModelPath, "/") {
		return ""
	}
	dir := path.Join(m.Workdir, sub.ModelPath)
	if dir == "." || dir == ".." || strings.HasPrefix(dir, "../") || !fs.ValidPath(dir) {
		return ""
	}
	found := false
	for _, f := range m.Files {
		switch {
		case f.Path == dir:
			if !f.Mode.IsDir() {
				return ""
			}
			found = true
		case strings.HasPrefix(f.Path, dir+"/") && f.Mode&fs.ModeSymlink != 0:
			return "" // what it points at may lie outside: restore it all
		}
	}
	if !found {
		return ""
	}
	return dir
}
