// Verify: a bundle checked against its signature, file by file.

package bundle

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	ita "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/safefs"
)

// Mismatch is a bundle that differs from what its operator signed: the
// piece names the first file, chunk or signature that does.
type Mismatch struct{ Piece, Why string }

func (e *Mismatch) Error() string { return e.Piece + ": " + e.Why }

// Unreadable is a directory that is not a bundle verify can read.
type Unreadable struct{ Err error }

func (e *Unreadable) Error() string { return e.Err.Error() }
func (e *Unreadable) Unwrap() error { return e.Err }

// Checked is what verify checked of one run's bundle.
type Checked struct {
	RunID string
	// KeyID signed the envelope; TrustedAs is the trusted key file that
	// verified it.
	KeyID, TrustedAs string
	Files            int
	Bytes            int64
	// Chunks were checked against the manifests (BLAKE3 of their
	// content) as well as by SHA-256; Manifests are the checkpoints.
	Chunks    int
	Manifests []string
	Predicate Predicate
	// Verified is every file checked, by name, as read: all that a
	// rescore may read of the bundle (Store).
	Verified map[string]Subject
}

// maxEnvelope bounds an envelope read: a day's run with a hundred
// thousand calls has a statement of a few tens of megabytes.
const maxEnvelope = 256 << 20

// maxManifest bounds a bundled manifest read.
const maxManifest = 1 << 30

// Find lists the runs bundled in dir (the keys of their envelopes).
func Find(dir string) ([]string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, &Unreadable{Err: fmt.Errorf("bundle %s: %w", dir, err)}
	}
	if !st.IsDir() {
		return nil, &Unreadable{Err: fmt.Errorf("bundle %s is not a directory", dir)}
	}
	runs, err := os.ReadDir(dir + "/runs")
	if err != nil {
		return nil, &Unreadable{Err: fmt.Errorf("%s is not a run bundle (no runs/ in it): %w", dir, err)}
	}
	var keys []string
	for _, r := range runs {
		key := "runs/" + r.Name() + "/bundle/" + EnvelopeFile
		if _, err := os.Lstat(dir + "/" + key); err == nil {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, &Unreadable{Err: fmt.Errorf("%s holds no signed run (no runs/*/bundle/%s)", dir, EnvelopeFile)}
	}
	return keys, nil
}

// Seen remembers the files one verify has checked already, by name and
// SHA-256: a benchmark's runs share their chunks, each read once.
type Seen struct{ m sync.Map }

func (s *Seen) has(sub Subject) bool {
	if s == nil {
		return false
	}
	v, ok := s.m.Load(sub.Name)
	return ok && v.(string) == sub.SHA256
}

func (s *Seen) add(sub Subject) {
	if s != nil {
		s.m.Store(sub.Name, sub.SHA256)
	}
}

// Verify checks the run bundle whose envelope is at key in root: the
// envelope against the trusted keys, every subject's size and SHA-256,
// and every chunk the bundled manifests name against its BLAKE3 hash.
// Files are opened from root's descriptor with no symlink on the way,
// regular files only, each read once: seen (nil: none) holds those an
// earlier Verify of this directory checked. It stops at the first file
// that differs.
func Verify(ctx context.Context, root *safefs.Dir, key string, trusted []*Verifier, seen *Seen) (*Checked, error) {
	c, subjects, err := openEnvelope(ctx, root, key, trusted)
	if err != nil {
		return nil, err
	}
	runPrefix := path.Dir(path.Dir(key)) + "/"
	if blob.RunPrefix(c.RunID) != runPrefix {
		return nil, &Mismatch{Piece: key, Why: fmt.Sprintf("its statement is of run %.80q, whose bundle would lie under %s, not %s", c.RunID, blob.RunPrefix(c.RunID), runPrefix)}
	}
	names := map[string]bool{}
	for _, s := range subjects {
		if !fs.ValidPath(s.Name) || (!strings.HasPrefix(s.Name, runPrefix) && !strings.HasPrefix(s.Name, "chunks/")) || names[s.Name] {
			return nil, &Mismatch{Piece: key, Why: fmt.Sprintf("names %q, which is not a file of this run's bundle", s.Name)}
		}
		names[s.Name] = true
		if strings.HasPrefix(s.Name, runPrefix+"checkpoints/") {
			c.Manifests = append(c.Manifests, s.Name)
		} else if strings.HasPrefix(s.Name, "chunks/") {
			c.Chunks++
		}
	}
	if err := checkFiles(ctx, root, subjects, c, seen); err != nil {
		return nil, err
	}
	c.Verified = make(map[string]Subject, len(subjects))
	for _, s := range subjects {
		c.Verified[s.Name] = s
	}
	return c, checkManifests(ctx, NewStore(root, c.Verified), c.Manifests, names)
}

// openEnvelope verifies the envelope's signature and reads its statement.
func openEnvelope(ctx context.Context, root *safefs.Dir, key string, trusted []*Verifier) (*Checked, []Subject, error) {
	f, _, err := root.OpenPath(key)
	if err != nil {
		return nil, nil, &Unreadable{Err: fmt.Errorf("envelope %s: %w", key, err)}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEnvelope+1))
	_ = f.Close()
	if err != nil {
		return nil, nil, &Unreadable{Err: fmt.Errorf("envelope %s: %w", key, err)}
	}
	var env dsse.Envelope
	if len(b) > maxEnvelope || json.Unmarshal(b, &env) != nil {
		return nil, nil, &Mismatch{Piece: key, Why: "not a DSSE envelope (damaged)"}
	}
	if env.PayloadType != PayloadType {
		return nil, nil, &Mismatch{Piece: key, Why: fmt.Sprintf("payload type %q, not an in-toto statement", env.PayloadType)}
	}
	vs := make([]dsse.Verifier, len(trusted))
	for i, t := range trusted {
		vs[i] = t
	}
	ev, err := dsse.NewMultiEnvelopeVerifier(1, vs...)
	if err != nil {
		return nil, nil, fmt.Errorf("verifier: %w", err)
	}
	accepted, payload, err := ev.VerifyAndDecode(ctx, &env)
	if err != nil || len(accepted) == 0 {
		return nil, nil, &Mismatch{Piece: key + " (signature)", Why: fmt.Sprintf("does not verify with any trusted key (%s): %v", keyIDs(trusted), err)}
	}
	c := &Checked{KeyID: accepted[0].KeyID}
	for _, t := range trusted {
		if t.id == c.KeyID {
			c.TrustedAs = t.From
		}
	}
	var st ita.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		return nil, nil, &Mismatch{Piece: key, Why: "its signed payload is not an in-toto statement: " + err.Error()}
	}
	if err := st.Validate(); err != nil || st.Type != ita.StatementTypeUri || st.PredicateType != PredicateType {
		return nil, nil, &Mismatch{Piece: key, Why: fmt.Sprintf("its statement (%s, %s) is not an mlrb run bundle's: %v", st.Type, st.PredicateType, err)}
	}
	pj, err := st.Predicate.MarshalJSON()
	if err == nil {
		err = json.Unmarshal(pj, &c.Predicate)
	}
	if err != nil {
		return nil, nil, &Mismatch{Piece: key, Why: "its predicate: " + err.Error()}
	}
	c.RunID = c.Predicate.RunID
	subjects := make([]Subject, len(st.Subject))
	for i, s := range st.Subject {
		subjects[i] = Subject{Name: s.Name, SHA256: s.Digest["sha256"], Size: -1}
		if v, ok := s.GetAnnotations().GetFields()[sizeAnnotation]; ok {
			n := v.GetNumberValue()
			if n < 0 || n != float64(int64(n)) {
				return nil, nil, &Mismatch{Piece: key, Why: fmt.Sprintf("subject %q has a size that is no byte count", s.Name)}
			}
			subjects[i].Size = int64(n)
		}
	}
	return c, subjects, nil
}

func keyIDs(vs []*Verifier) string {
	ids := make([]string, len(vs))
	for i, v := range vs {
		ids[i] = v.id[:16] + "… from " + v.From
	}
	return strings.Join(ids, ", ")
}

// checkFiles hashes every subject, a few at a time, and names the first
// (in the statement's order) that differs.
func checkFiles(ctx context.Context, root *safefs.Dir, subjects []Subject, c *Checked, seen *Seen) error {
	errs := make([]error, len(subjects))
	var bytes atomic.Int64
	workers := runtime.GOMAXPROCS(0)
	checkers := make(chan *checkpoint.ChunkChecker, workers)
	for range workers {
		ck, err := checkpoint.NewChunkChecker()
		if err != nil {
			return err
		}
		defer ck.Close()
		checkers <- ck
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i, s := range subjects {
		if seen.has(s) {
			continue
		}
		g.Go(func() error {
			if gctx.Err() != nil {
				return gctx.Err() // a file differed: stop there
			}
			ck := <-checkers
			defer func() { checkers <- ck }()
			n, err := checkFile(root, s, ck)
			bytes.Add(n)
			if errs[i] = err; err == nil {
				seen.add(s)
			}
			return err
		})
	}
	werr := g.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if werr != nil {
		return werr
	}
	c.Files, c.Bytes = len(subjects), bytes.Load()
	return nil
}

// checkFile reads one subject once, opened without blocking (a FIFO is
// refused, not waited on) and stat'd against its signed size first: its
// SHA-256 over the bytes as stored, and only then, for a chunk, the
// BLAKE3 of its decoded content against its name.
func checkFile(root *safefs.Dir, s Subject, ck *checkpoint.ChunkChecker) (int64, error) {
	piece := s.Name
	if strings.HasPrefix(s.Name, "chunks/") {
		piece = "chunk " + s.Name
	}
	f, st, err := root.OpenPath(s.Name)
	if err != nil {
		return 0, &Mismatch{Piece: piece, Why: "missing, unreadable or not a regular file: " + err.Error()}
	}
	defer func() { _ = f.Close() }()
	switch limit := sizeLimit(s.Name); {
	case s.Size >= 0 && st.Size != s.Size:
		return 0, &Mismatch{Piece: piece, Why: fmt.Sprintf("%d bytes, the statement says %d", st.Size, s.Size)}
	case st.Size > limit:
		return 0, &Mismatch{Piece: piece, Why: fmt.Sprintf("%d bytes, more than a bundle's file of its kind holds (%d)", st.Size, limit)}
	}
	sum := sha256.New()
	n, err := io.Copy(sum, bufio.NewReaderSize(io.LimitReader(f, st.Size+1), 1<<20))
	if err != nil {
		return n, &Mismatch{Piece: piece, Why: "unreadable: " + err.Error()}
	}
	if got := hex.EncodeToString(sum.Sum(nil)); n != st.Size || got != s.SHA256 {
		return n, &Mismatch{Piece: piece, Why: fmt.Sprintf("SHA-256 %s, the statement says %s", got[:16]+"…", s.SHA256[:min(16, len(s.SHA256))]+"…")}
	}
	if !strings.HasPrefix(s.Name, "chunks/") {
		return n, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return n, &Mismatch{Piece: piece, Why: "unreadable: " + err.Error()}
	}
	_, err = ck.Check(bufio.NewReaderSize(f, 1<<20), path.Base(s.Name))
	var bad *checkpoint.CorruptChunkError
	if errors.As(err, &bad) {
		return n, &Mismatch{Piece: piece, Why: bad.Reason}
	}
	if err != nil {
		return n, &Mismatch{Piece: piece, Why: "unreadable: " + err.Error()}
	}
	return n, nil
}

// Bounds on a subject's size where its bundle signed none (one made
// before sizes were signed): a chunk as stored, a manifest, and any other
// file of a run's record.
const maxUnsized = 64 << 30

func sizeLimit(name string) int64 {
	switch {
	case strings.HasPrefix(name, "chunks/"):
		return checkpoint.MaxStoredChunk
	case strings.Contains(name, "/checkpoints/"):
		return maxManifest
	}
	return maxUnsized
}

// checkManifests checks that every chunk each bundled manifest names is
// a subject of the statement (and so was checked), and that each packed
// file is the content its entry names.
func checkManifests(ctx context.Context, verified *Store, manifests []string, names map[string]bool) error {
	for _, key := range manifests {
		f, err := verified.Get(ctx, key)
		if err != nil {
			return &Mismatch{Piece: key, Why: err.Error()}
		}
		m, err := checkpoint.DecodeManifest(io.LimitReader(f, maxManifest))
		_ = f.Close()
		if err != nil {
			return &Mismatch{Piece: key, Why: "not a manifest: " + err.Error()}
		}
		for _, fl := range m.Files {
			for _, h := range fl.Stored() {
				if len(h) < 3 || !names[checkpoint.ChunkKey(h)] {
					return &Mismatch{Piece: key, Why: fmt.Sprintf("file %q needs chunk %.16s…, which the bundle does not hold", fl.Path, h)}
				}
			}
		}
		if err := m.CheckPacks(func(k string) (io.ReadCloser, error) { return verified.Get(ctx, k) }); err != nil {
			return &Mismatch{Piece: key, Why: err.Error()}
		}
	}
	return nil
}
