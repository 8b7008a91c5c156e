// Bounds that make every checkpoint restorable and readable.

package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/mlrb/mlrb/internal/store/safefs"
)

// Bounds that make every checkpoint restorable and readable: what a save
// meets past them is left out and the checkpoint marked incomplete, which
// fails the attempt as the agent's doing and is never scored.
const (
	// MaxPathBytes bounds an entry's path in the workspace: a restore
	// creates it under a directory of the worker's (an evaluation's, a
	// new attempt's), and the kernel refuses paths past PATH_MAX (4,096
	// bytes) whole. A kilobyte is left for the restore's own directory.
	MaxPathBytes = 3 << 10
	// MaxManifestBytes bounds what the entries' paths and links add up
	// to, as the manifest is read back whole.
	MaxManifestBytes = 256 << 20
	// maxOmitted bounds the paths an incomplete manifest names.
	maxOmitted = 16
)

// unrestorable says why a restore could not create en ("" when it can).
func unrestorable(en safefs.Entry) string {
	switch {
	case len(en.Rel) > MaxPathBytes:
		return fmt.Sprintf("a path of %d bytes is longer than a restore can create (%d bytes at most): %.80s…", len(en.Rel), MaxPathBytes, en.Rel)
	case errors.Is(en.Err, safefs.ErrTooDeep):
		return fmt.Sprintf("directories nest deeper than %d levels: %.80s…", safefs.MaxDepth, en.Rel)
	case en.Err != nil:
		return fmt.Sprintf("%s cannot be read: %v", en.Rel, en.Err)
	}
	return ""
}

// entryBytes is about what an entry costs in the manifest.
func entryBytes(en safefs.Entry) int64 { return int64(len(en.Rel)) + 128 }

// incomplete marks the manifest as leaving entries out, keeping the first
// reason.
func (s *saving) incomplete(why string) {
	s.m.Truncated = true
	if s.m.Incomplete == "" {
		s.m.Incomplete = why
	}
}

// gone passes over an entry deleted or replaced while the walk went on:
// it is not part of this snapshot.
func gone(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, safefs.ErrRefused) {
		return nil
	}
	return err
}

// excluded tells whether a snapshot path is one never saved.
func (e *Engine) excluded(rel string) bool {
	for _, g := range e.Exclude {
		if ok, _ := path.Match(g, rel); ok {
			return true
		}
	}
	return false
}

// errChanged means the file's size or mtime moved during the read.
var errChanged = errors.New("changed during read")

// checkChunks refuses a chunk name that is not a BLAKE3 hash (it becomes
// a store key) and a packed file that does not lie inside one pack: a
// manifest may come from someone else's bundle.
func (m *Manifest) checkChunks() error {
	for i := range m.Files {
		f := &m.Files[i]
		for _, h := range f.Chunks {
			if !isHash(h) {
				return fmt.Errorf("files[%d]: chunk %.70q is not a BLAKE3 hash (64 hex digits)", i, h)
			}
		}
		if f.Pack == "" {
			continue
		}
		switch {
		case !isHash(f.Pack):
			return fmt.Errorf("files[%d]: pack %.70q is not a BLAKE3 hash (64 hex digits)", i, f.Pack)
		case len(f.Chunks) != 1 || f.Size <= 0 || f.PackOffset < 0 || f.PackOffset > int64(m.ChunkSize)-f.Size:
			return fmt.Errorf("files[%d]: a packed file must be one chunk of 1 to %d bytes inside its pack (offset %d, size %d, %d chunks)",
				i, m.ChunkSize, f.PackOffset, f.Size, len(f.Chunks))
		}
	}
	return nil
}

func isHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
