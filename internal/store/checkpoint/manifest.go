// Manifest lists a checkpoint's files and the chunks they are made of.

package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// Manifest lists a checkpoint's files and the chunks they are made of.
type Manifest struct {
	Version      int       `json:"version"`
	Hash         string    `json:"hash"`
	ChunkSize    int       `json:"chunk_size"`
	RunID        string    `json:"run_id"`
	Seq          int       `json:"seq"`
	Attempt      int       `json:"attempt"`
	CreatedAt    time.Time `json:"created_at"`
	AgentSeconds float64   `json:"agent_seconds"`
	Files        []File    `json:"files"`
	Bytes        int64     `json:"bytes"`
	NewBytes     int64     `json:"new_bytes"`
	NewChunks    int       `json:"new_chunks"`
	// Final marks the checkpoint taken when the agent ended; retention
	// never deletes it.
	Final bool `json:"final,omitempty"`
	// Ending is how the agent ended, on a final checkpoint.
	Ending *Ending `json:"ending,omitempty"`
	// Workdir is where MLRB_WORKDIR lies in the snapshot ("" for the root).
	Workdir string `json:"workdir,omitempty"`
	// Unsettled lists files that kept changing while they were read: each
	// holds its version from the previous checkpoint, or is left out when
	// it had none. A file written without pause (a training log) must not
	// block every checkpoint, and a torn file is never committed.
	Unsettled []string `json:"unsettled,omitempty"`
	// Omitted lists directories left out whole: nested deeper than a
	// walk descends (safefs.MaxDepth).
	Omitted []string `json:"omitted,omitempty"`
	// Truncated: entries of the workspace are left out, because a
	// restore could not create them or the manifest could not hold them
	// (Incomplete says which was first met); the attempt is then failed,
	// and the checkpoint is never scored.
	Truncated  bool   `json:"truncated,omitempty"`
	Incomplete string `json:"incomplete,omitempty"`
	// RawNames is, on the wire only, the names that are not UTF-8
	// (withRawNames, applyRawNames).
	RawNames []rawName `json:"raw_names,omitempty"`
	// SupersededBy is, in a listing, the later attempt that made this
	// checkpoint a zombie's (0: it is the run's).
	SupersededBy int `json:"-"`
}

// File is one entry of a workspace: a regular file, a directory or a symlink.
type File struct {
	Path   string      `json:"path"`
	Mode   fs.FileMode `json:"mode"`
	Size   int64       `json:"size,omitempty"`
	MTime  int64       `json:"mtime_ns,omitempty"`
	Link   string      `json:"link,omitempty"`
	Chunks []string    `json:"chunks,omitempty"`
	// HardLink names the earlier file of the snapshot this one is a
	// hardlink to (same inode): restored as a link, its bytes stored once.
	HardLink string `json:"hardlink,omitempty"`
	// Pack, for a small file, is the chunk holding its bytes from
	// PackOffset on, beside other small files' (pack.go); Chunks then
	// holds the hash of the file's own content, as for a file of one chunk.
	Pack       string `json:"pack,omitempty"`
	PackOffset int64  `json:"pack_offset,omitempty"`
}

// Stored is what the store must hold for f's bytes: its pack, or its
// chunks.
func (f *File) Stored() []string {
	if f.Pack != "" {
		return []string{f.Pack}
	}
	return f.Chunks
}

// sameContent makes f's bytes t's: size, chunks and pack.
func (f *File) sameContent(t File) {
	f.Size, f.Chunks, f.Pack, f.PackOffset = t.Size, t.Chunks, t.Pack, t.PackOffset
}

// rawName holds, on the wire, the names of one entry (Files[I]) that are
// not UTF-8: JSON would turn them into U+FFFD, so that two such names
// collide. Names are bytes; the manifest keeps them byte for byte in this
// side table, which costs nothing for the usual manifest, all UTF-8
// (a marshaler per entry would double the encoding of 500,000 entries).
type rawName struct {
	I        int    `json:"i"`
	Path     []byte `json:"path,omitempty"`
	Link     []byte `json:"link,omitempty"`
	HardLink []byte `json:"hardlink,omitempty"`
}

// withRawNames is m as written: a shallow copy carrying the side table
// when a name is not UTF-8, else m itself.
func (m *Manifest) withRawNames() *Manifest {
	var raw []rawName
	for i, f := range m.Files {
		if utf8.ValidString(f.Path) && utf8.ValidString(f.Link) && utf8.ValidString(f.HardLink) {
			continue
		}
		r := rawName{I: i}
		for _, n := range []struct {
			s string
			b *[]byte
		}{{f.Path, &r.Path}, {f.Link, &r.Link}, {f.HardLink, &r.HardLink}} {
			if !utf8.ValidString(n.s) {
				*n.b = []byte(n.s)
			}
		}
		raw = append(raw, r)
	}
	if raw == nil {
		return m
	}
	c := *m
	c.RawNames = raw
	return &c
}

// applyRawNames puts the side table's names back into the files, as read.
func (m *Manifest) applyRawNames() error {
	for _, r := range m.RawNames {
		if r.I < 0 || r.I >= len(m.Files) {
			return fmt.Errorf("raw name of entry %d: the manifest has %d", r.I, len(m.Files))
		}
		f := &m.Files[r.I]
		for _, n := range []struct {
			b []byte
			s *string
		}{{r.Path, &f.Path}, {r.Link, &f.Link}, {r.HardLink, &f.HardLink}} {
			if n.b != nil {
				*n.s = string(n.b)
			}
		}
	}
	m.RawNames = nil
	return nil
}

// Meta is what the caller says about a checkpoint it saves.
type Meta struct {
	RunID        string
	Seq          int
	Attempt      int
	AgentSeconds float64
	Final        bool
	Ending       *Ending
	Workdir      string
}

// Ending is how the agent ended, kept with its final checkpoint so that a
// run continued later (a resumed benchmark) knows whether and how to
// evaluate it without starting the agent again.
type Ending struct {
	StoppedBy string `json:"stopped_by"`
	ExitCode  int    `json:"exit_code"`
	Reason    string `json:"reason,omitempty"`
}

// SeqTakenError: another attempt of the run committed this sequence
// number; a checkpoint never overwrites another attempt's.
type SeqTakenError struct{ Seq, Attempt int }

func (e *SeqTakenError) Error() string {
	return fmt.Sprintf("checkpoint #%d is attempt %d's", e.Seq, e.Attempt)
}

// commit writes the manifest: the checkpoint exists from here on. An
// attempt that a later one has fenced commits nothing. The manifest is
// created conditionally, so of two attempts racing for a sequence number
// one wins; the same attempt may write its number again (a retried save).
func (e *Engine) commit(ctx context.Context, m *Manifest) error {
	fs, err := e.fences(ctx, m.RunID)
	if err != nil {
		return fmt.Errorf("checkpoint %s #%d: %w", m.RunID, m.Seq, err)
	}
	if f := supersededBy(m.Attempt, 0, fs); f != nil {
		return &FencedError{Attempt: m.Attempt, By: f.Attempt}
	}
	body, err := json.MarshalIndent(m.withRawNames(), "", " ")
	if err != nil {
		return fmt.Errorf("checkpoint %s #%d: encode manifest: %w", m.RunID, m.Seq, err)
	}
	key := ManifestKey(m.RunID, m.Seq)
	err = e.Store.Create(ctx, key, bytes.NewReader(body))
	if errors.Is(err, blob.ErrExists) {
		old, lerr := e.loadKey(ctx, key)
		switch {
		case lerr != nil:
			return fmt.Errorf("checkpoint %s #%d: %w", m.RunID, m.Seq, lerr)
		case old.Attempt != m.Attempt:
			return &SeqTakenError{Seq: m.Seq, Attempt: old.Attempt}
		}
		err = e.Store.Put(ctx, key, bytes.NewReader(body))
	}
	if err != nil {
		return fmt.Errorf("checkpoint %s #%d: commit manifest: %w", m.RunID, m.Seq, err)
	}
	return nil
}

// ErrNoCheckpoint means a run has no committed checkpoint.
var ErrNoCheckpoint = errors.New("no committed checkpoint")

// manifestKeys lists a run's manifest keys, oldest first (the keys are
// zero-padded and the store lists them sorted).
func (e *Engine) manifestKeys(ctx context.Context, runID string) ([]string, error) {
	objs, err := e.Store.List(ctx, runPrefix(runID))
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", runID, err)
	}
	var keys []string
	for _, o := range objs {
		if _, err := strconv.Atoi(strings.TrimSuffix(path.Base(o.Key), ".json")); err == nil {
			keys = append(keys, o.Key)
		}
	}
	return keys, nil
}

// LastSeq is the highest sequence number any manifest of the run holds,
// a superseded attempt's included (0: none). A new number is taken past
// it: one a zombie took after the fence is never tried again.
func (e *Engine) LastSeq(ctx context.Context, runID string) (int, error) {
	keys, err := e.manifestKeys(ctx, runID)
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSuffix(path.Base(keys[len(keys)-1]), ".json"))
}

// keysAndFences lists a run's manifest keys and reads its fences: what
// tells its checkpoints from a superseded attempt's.
func (e *Engine) keysAndFences(ctx context.Context, runID string) ([]string, []Fence, error) {
	keys, err := e.manifestKeys(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	fs, err := e.fences(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	return keys, fs, nil
}

// List returns a run's committed checkpoints, oldest first, with those a
// superseded attempt wrote marked.
func (e *Engine) List(ctx context.Context, runID string) ([]*Manifest, error) {
	keys, fs, err := e.keysAndFences(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]*Manifest, 0, len(keys))
	for _, k := range keys {
		m, err := e.loadKey(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("checkpoint of %s: %w", runID, err)
		}
		if f := supersededBy(m.Attempt, m.Seq, fs); f != nil {
			m.SupersededBy = f.Attempt
		}
		out = append(out, m)
	}
	return out, nil
}

// Latest reads a run's newest checkpoint that is the run's (not a
// superseded attempt's); ErrNoCheckpoint if it has none.
func (e *Engine) Latest(ctx context.Context, runID string) (*Manifest, error) {
	keys, fs, err := e.keysAndFences(ctx, runID)
	if err != nil {
		return nil, err
	}
	for i := len(keys) - 1; i >= 0; i-- {
		m, err := e.loadKey(ctx, keys[i])
		if err != nil {
			return nil, fmt.Errorf("checkpoint of %s: %w", runID, err)
		}
		if supersededBy(m.Attempt, m.Seq, fs) == nil {
			return m, nil
		}
	}
	return nil, fmt.Errorf("run %s: %w", runID, ErrNoCheckpoint)
}

// Load reads one committed manifest; a superseded attempt's is refused.
func (e *Engine) Load(ctx context.Context, runID string, seq int) (*Manifest, error) {
	m, err := e.loadKey(ctx, ManifestKey(runID, seq))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s #%d: %w", runID, seq, err)
	}
	fs, err := e.fences(ctx, runID)
	if err != nil {
		return nil, err
	}
	if f := supersededBy(m.Attempt, m.Seq, fs); f != nil {
		return nil, fmt.Errorf("checkpoint %s #%d: attempt %d %w after attempt %d took over from #%d", runID, seq, m.Attempt, ErrSuperseded, f.Attempt, f.FromSeq)
	}
	return m, nil
}

func (e *Engine) loadKey(ctx context.Context, key string) (*Manifest, error) {
	rc, err := e.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	m, err := DecodeManifest(rc)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", key, err)
	}
	return m, nil
}

// DecodeManifest reads a manifest as stored, its raw names applied.
func DecodeManifest(r io.Reader) (*Manifest, error) {
	var m Manifest
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return nil, err
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	if err := m.applyRawNames(); err != nil {
		return nil, err
	}
	if err := m.checkTree(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Manifest versions: 2, every file in chunks of its own; 3, small files
// in packs (pack.go). A worker refuses a manifest newer than it reads,
// rather than take what it does not know for missing chunks.
const (
	versionChunks = 2
	versionPacks  = 3
)

// check refuses what no save makes and a restore cannot take: see
// checkChunkSize and checkChunks.
func (m *Manifest) check() error {
	if m.Version > versionPacks {
		return fmt.Errorf("manifest version %d is newer than this build reads (%d): upgrade this worker or starter", m.Version, versionPacks)
	}
	if err := m.checkChunkSize(); err != nil {
		return err
	}
	return m.checkChunks()
}

// checkChunkSize refuses a chunk size no save makes: a restore sizes its
// buffers by it and writes each chunk at its index times it.
func (m *Manifest) checkChunkSize() error {
	if m.ChunkSize <= 0 || m.ChunkSize > MaxChunkSize {
		return fmt.Errorf("chunk_size %d is out of range (1 to %d bytes)", m.ChunkSize, MaxChunkSize)
	}
	return nil
}

// Created is when the checkpoint was made (zero for none).
func (m *Manifest) Created() time.Time {
	if m == nil {
		return time.Time{}
	}
	return m.CreatedAt
}
