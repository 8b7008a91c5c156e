// The data sets an evaluator reads, found and checked against their hashes.

// Package evaldata finds the data sets a task's evaluator reads (its
// evaluation.data) on a worker and checks each against the hash its spec
// names: a held-out set that is missing, or is not the one the spec was
// written for, is refused before anything is scored with it.
package evaldata

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/mlrb/mlrb/tasks"
)

// Digest is a data set's hash: a file's bytes, or a directory's regular
// files, each as its slash path, its size and its bytes' SHA-256, sorted
// by path. Links and other kinds of file are refused: a data set is what
// it holds, not what it points at.
func Digest(path string) (string, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	switch {
	case st.Mode().IsRegular():
		sum, err := fileSum(path)
		if err != nil {
			return "", err
		}
		return "sha256:" + sum, nil
	case !st.IsDir():
		return "", fmt.Errorf("%s is a %s, not a file or a directory", path, st.Mode().Type())
	}
	var lines []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is a %s: a data set holds regular files only", p, d.Type())
		}
		rel, _ := filepath.Rel(path, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum, err := fileSum(p)
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s\x00%d\x00%s\n", filepath.ToSlash(rel), info.Size(), sum))
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		_, _ = io.WriteString(h, l)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Dir is a worker's eval.data_dir: where the data sets its evaluators
// read lie, each at its name. Digests are kept per path while its size,
// modification time and inode stay, so a run's start does not read a
// large set again.
type Dir struct {
	Root string
	mu   sync.Mutex
	seen map[string]stamped
}

type stamped struct {
	stamp, digest string
}

// MissingError is a task's data set the worker does not have, or has in
// another version than the spec's: a bad setup, named for the operator.
type MissingError struct{ Msg string }

func (e *MissingError) Error() string { return e.Msg }

// Set is a data set found and checked: where it lies on this host and its
// digest.
type Set struct {
	Name, Path, SHA256 string
}

// Check finds every data set of the task's evaluator under the root and
// checks its digest against the spec's.
func (d *Dir) Check(spec *tasks.Spec) ([]Set, error) {
	data := spec.Evaluation.Data
	if len(data) == 0 {
		return nil, nil
	}
	fix := func(e tasks.EvalData) string {
		return fmt.Sprintf("(fetch it: %s)", e.Source)
	}
	if d == nil || d.Root == "" {
		e := data[0]
		return nil, &MissingError{Msg: fmt.Sprintf("task %s's evaluator reads %s (%s), and this worker has no eval.data_dir: set it to the directory that holds it %s", spec.ID, e.Name, e.SHA256, fix(e))}
	}
	out := make([]Set, 0, len(data))
	for _, e := range data {
		path := filepath.Join(d.Root, filepath.FromSlash(e.Name))
		got, err := d.digest(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, &MissingError{Msg: fmt.Sprintf("task %s's evaluator reads %s, which is not at %s (eval.data_dir): want %s %s", spec.ID, e.Name, path, e.SHA256, fix(e))}
		case err != nil:
			return nil, &MissingError{Msg: fmt.Sprintf("task %s's data %s at %s: %v", spec.ID, e.Name, path, err)}
		case got != e.SHA256:
			return nil, &MissingError{Msg: fmt.Sprintf("task %s's data %s at %s is %s, not the %s its spec names: it changed, or is another version %s", spec.ID, e.Name, path, got, e.SHA256, fix(e))}
		}
		out = append(out, Set{Name: e.Name, Path: path, SHA256: got})
	}
	return out, nil
}

// digest is Digest, kept while path's stamp stays.
func (d *Dir) digest(path string) (string, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	stamp := fmt.Sprintf("%d %d %v", st.Size(), st.ModTime().UnixNano(), inode(st))
	d.mu.Lock()
	if s, ok := d.seen[path]; ok && s.stamp == stamp && !st.IsDir() {
		d.mu.Unlock()
		return s.digest, nil
	}
	d.mu.Unlock()
	got, err := Digest(path)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	if d.seen == nil {
		d.seen = map[string]stamped{}
	}
	d.seen[path] = stamped{stamp: stamp, digest: got}
	d.mu.Unlock()
	return got, nil
}

// ProvenanceKey is where a data set's digest is in a result's provenance.
func ProvenanceKey(name string) string { return "evaluation_data/" + strings.TrimPrefix(name, "/") }
