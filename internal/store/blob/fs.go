// FS stores blobs as files under a root directory.

package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// FS stores blobs as files under a root directory.
type FS struct{ root string }

// NewFS returns a store rooted at dir, creating it.
func NewFS(dir string) (*FS, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("blob store %s: %w", dir, err)
	}
	return &FS{root: dir}, nil
}

// String is fs:<root>, the root absolute.
func (s *FS) String() string {
	if abs, err := filepath.Abs(s.root); err == nil {
		return FSPrefix + abs
	}
	return FSPrefix + s.root
}

// FSPrefix starts a filesystem store's description.
const FSPrefix = "fs:"

func (s *FS) path(key string) (string, error) {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "..") || strings.Contains(key, `\`) {
		return "", fmt.Errorf("blob key %q is not a clean relative key", key)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// Put writes to a temp file, syncs it and renames it into place, so a crash
// never leaves a partial blob under the key.
func (s *FS) Put(ctx context.Context, key string, r io.Reader) error {
	return s.write(ctx, key, r, os.Rename)
}

// Create is Put that links instead of renaming: link(2) fails when the
// name exists, so of two writers exactly one creates the blob.
func (s *FS) Create(ctx context.Context, key string, r io.Reader) error {
	err := s.write(ctx, key, r, os.Link)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", key, ErrExists)
	}
	return err
}

// write stages the blob in a synced temp file and places it with place.
func (s *FS) write(ctx context.Context, key string, r io.Reader, place func(tmp, p string) error) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := io.Copy(tmp, ctxReader{ctx, r}); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("put %s: sync: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := place(tmp.Name(), p); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// Get opens a blob.
func (s *FS) Get(_ context.Context, key string) (io.ReadCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return f, nil
}

// Exists tells whether a blob is stored.
func (s *FS) Exists(_ context.Context, key string) (bool, error) {
	p, err := s.path(key)
	if err != nil {
		return false, err
	}
	_, err = os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", key, err)
	}
	return true, nil
}

// List walks the directory of the prefix's parent and filters by prefix.
func (s *FS) List(_ context.Context, prefix string) ([]Object, error) {
	base := s.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		base = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
	}
	var objs []Object
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".tmp-") {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		objs = append(objs, Object{Key: key, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// Delete removes a blob; deleting a missing blob is not an error.
func (s *FS) Delete(_ context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
