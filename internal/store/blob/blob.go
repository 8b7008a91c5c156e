// The Store interface and the run's key prefix.

// Package blob is the object store behind checkpoints, logs and results.
// Keys are slash-separated; a Put is atomic: readers see all or nothing.
package blob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mlrb/mlrb/internal/store/keys"
)

// RunPrefix is where a run's blobs live (its checkpoints, logs and
// evaluation results below it): one layout for every writer and reader.
func RunPrefix(runID string) string { return keys.Run(runID) }

// ErrNotFound is returned by Get for a key that does not exist.
var ErrNotFound = errors.New("blob not found")

// ErrExists is returned by Create for a key that is already taken.
var ErrExists = errors.New("blob already exists")

// Store is the blob-store seam; the filesystem store is the default and an
// S3 store drops in behind the same interface.
type Store interface {
	Put(ctx context.Context, key string, r io.Reader) error
	// Create writes a new blob and fails with ErrExists, atomically, when
	// the key is taken: two writers racing for one key never both win.
	Create(ctx context.Context, key string, r io.Reader) error
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	Exists(ctx context.Context, key string) (bool, error)
	// List returns the objects under prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]Object, error)
	Delete(ctx context.Context, key string) error
	// String says where the store is (fs:/dir, s3://bucket/prefix), so
	// that a run can tell its readers where it wrote.
	String() string
}

// Object is a listed blob.
type Object struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// StoreError is a store that cannot be opened as configured.
type StoreError struct{ Msg string }

func (e *StoreError) Error() string { return e.Msg }

// ReadAll reads a blob whole, up to limit bytes (a larger one is an
// error, never a short read).
func ReadAll(ctx context.Context, s Store, key string, limit int64) ([]byte, error) {
	rc, err := s.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	defer func() { _ = rc.Close() }()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Key: key, Limit: limit}
	}
	return b, nil
}

// TooLargeError is a blob larger than its reader allows: never read short.
type TooLargeError struct {
	Key   string
	Limit int64
}

func (e *TooLargeError) Error() string { return fmt.Sprintf("%s is over %d bytes", e.Key, e.Limit) }

// ReadJSON decodes a blob of at most limit bytes into v; a missing blob
// is ErrNotFound, wrapped.
func ReadJSON(ctx context.Context, s Store, key string, limit int64, v any) error {
	b, err := ReadAll(ctx, s, key, limit)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}
