// Store is a bundle read as a store, serving exactly the files verify checked and nothing else.

package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/keys"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

// Store is a bundle read as a store, serving exactly the files verify
// checked and nothing else: a file added beside a signed bundle (another
// run's manifest, a control, an anchor) does not exist here. Each file is
// opened from the bundle's descriptor (never its path again) and hashed
// again as it is read, so bytes swapped in after verify are an error,
// never data. Read-only: writes go to a store of the reader's own (an
// overlay's upper layer).
type Store struct {
	root  *safefs.Dir
	files map[string]Subject
}

// NewStore serves files (name → what verify read) from root.
func NewStore(root *safefs.Dir, files map[string]Subject) *Store {
	return &Store{root: root, files: files}
}

// Union is the store of every verified run of one bundle directory (a
// benchmark's runs share their chunks).
func Union(root *safefs.Dir, checked []*Checked) *Store {
	files := map[string]Subject{}
	for _, c := range checked {
		maps.Copy(files, c.Verified)
	}
	return NewStore(root, files)
}

var errReadOnly = errors.New("a verified bundle is read-only")

// Get opens a verified file.
func (s *Store) Get(_ context.Context, key string) (io.ReadCloser, error) {
	sub, ok := s.files[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w (not a file the bundle's signature covers)", key, blob.ErrNotFound)
	}
	f, st, err := s.root.OpenPath(key)
	if err != nil {
		return nil, fmt.Errorf("verified file %s: %w", key, err)
	}
	if sub.Size >= 0 && st.Size != sub.Size {
		_ = f.Close()
		return nil, fmt.Errorf("verified file %s: %d bytes now, %d when verified: changed since", key, st.Size, sub.Size)
	}
	r := &checked{r: io.LimitReader(f, st.Size+1), c: f, sum: sha256.New(), want: sub.SHA256, key: key}
	if strings.HasPrefix(key, "chunks/") {
		// A chunk is read to its end (its last Read fails on a
		// mismatch), and its content is checked against its name
		// besides: it streams. Anything else (a manifest a decoder may
		// stop short in) is read whole and checked before a byte is out.
		return r, nil
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// Exists tells whether key is a verified file.
func (s *Store) Exists(_ context.Context, key string) (bool, error) {
	_, ok := s.files[key]
	return ok, nil
}

// List lists the verified files under prefix, sorted.
func (s *Store) List(_ context.Context, prefix string) ([]blob.Object, error) {
	var out []blob.Object
	for _, k := range slices.Sorted(maps.Keys(s.files)) {
		if strings.HasPrefix(k, prefix) {
			out = append(out, blob.Object{Key: k, Size: max(s.files[k].Size, 0)})
		}
	}
	return out, nil
}

func (s *Store) Put(context.Context, string, io.Reader) error    { return errReadOnly }
func (s *Store) Create(context.Context, string, io.Reader) error { return errReadOnly }
func (s *Store) Delete(context.Context, string) error            { return errReadOnly }
func (s *Store) String() string                                  { return "verified bundle " + s.root.Path() }

// checked hashes a file as it is read; at its end it fails unless the
// bytes are those verify read.
type checked struct {
	r    io.Reader
	c    io.Closer
	sum  hash.Hash
	want string
	key  string
	// bad is the mismatch found at the end, returned from then on.
	bad error
}

func (c *checked) Read(p []byte) (int, error) {
	if c.bad != nil {
		return 0, c.bad
	}
	n, err := c.r.Read(p)
	c.sum.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(c.sum.Sum(nil)); got != c.want {
			c.bad = fmt.Errorf("verified file %s: its bytes changed since verify (SHA-256 %.16s…, verified %.16s…)", c.key, got, c.want)
			return n, c.bad
		}
	}
	return n, err
}

func (c *checked) Close() error { return c.c.Close() }

// Result is the run's stored result as bundled: result.json's bytes as
// signed (by its SHA-256), never the predicate's copy, whose numbers the
// statement's encoding made float64.
func (s *Store) Result(ctx context.Context, runID string) ([]byte, error) {
	return blob.ReadAll(ctx, s, keys.Result(runID), maxEnvelope)
}
