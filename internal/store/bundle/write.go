// Writer writes run bundles into one directory from an operator's store.

package bundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/checkpoint"
	"github.com/mlrb/mlrb/internal/store/keys"
)

// Writer writes run bundles into one directory from an operator's store.
// Every file is streamed (a 20 GB model never sits in memory) and hashed
// as it is written; a chunk already in the directory is checked, not
// written again.
type Writer struct {
	Dir    string
	Store  blob.Store
	Signer *Signer
	// Parallel is how many chunks are copied at once (at least 1).
	Parallel int
	// Progress, if set, is told of each stored byte copied or checked.
	Progress func(n int64)
	// WithSessions keeps a person's run's session recordings and notes
	// in the bundle; without it they stay in the store (a published
	// bundle cannot be recalled): sessions/ is left out, and the result's
	// notes and the people's labels with it.
	WithSessions bool

	mu     sync.Mutex
	chunks map[string]Subject // by BLAKE3 hash: what the directory holds
}

// Input is one run to bundle.
type Input struct {
	RunID string
	// Final and Marks are the checkpoints whose manifests and chunks go
	// in: the scored one, and the curve's.
	Final int
	Marks []int
	// Task, Agent and Evaluator are written as the bundle's own files.
	Task, Agent, Evaluator any
	// Predicate is filled in with the run's checkpoints, store, time and
	// stored result.
	Predicate Predicate
}

// Written is what a run's bundle holds.
type Written struct {
	Subjects []Subject
	Chunks   int
	// NewChunks were written; the others were in the directory already.
	NewChunks int
	Bytes     int64
}

// Run bundles one run: its stored record, its checkpoints' chunks, the
// bundle's own files and the signed envelope over all of them.
func (w *Writer) Run(ctx context.Context, in Input) (*Written, error) {
	runDir := filepath.Join(w.Dir, filepath.FromSlash(blob.RunPrefix(in.RunID)))
	// A bundle written again holds what the store holds now, nothing older.
	if err := os.RemoveAll(runDir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", runDir, err)
	}
	keep := map[string]bool{}
	for _, s := range append([]int{in.Final}, in.Marks...) {
		if s == 0 {
			continue // a run that ended with no checkpoint
		}
		keep[checkpoint.ManifestKey(in.RunID, s)] = true
	}
	out := &Written{}
	if err := w.copyRecord(ctx, in.RunID, keep, out); err != nil {
		return nil, err
	}
	if err := w.copyChunks(ctx, in.RunID, slices.Sorted(maps.Keys(keep)), out); err != nil {
		return nil, err
	}
	if err := w.writeMeta(ctx, in, out); err != nil {
		return nil, err
	}
	return out, w.seal(ctx, in, out)
}

// copyRecord copies what the store keeps under the run, but for the
// checkpoints' manifests not asked for.
func (w *Writer) copyRecord(ctx context.Context, runID string, keep map[string]bool, out *Written) error {
	prefix := blob.RunPrefix(runID)
	objs, err := w.Store.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("list the record of %s: %w", runID, err)
	}
	for k := range keep {
		if !slices.ContainsFunc(objs, func(o blob.Object) bool { return o.Key == k }) {
			return fmt.Errorf("%s: checkpoint %s is not in the store %s", runID, path.Base(k), w.Store)
		}
	}
	// A day's transcript is a hundred thousand small objects: read a few
	// at a time, as chunks are.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, w.Parallel))
	var mu sync.Mutex
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, prefix)
		if (strings.HasPrefix(rel, "checkpoints/") && !keep[o.Key]) || strings.HasPrefix(rel, "bundle/") || strings.HasPrefix(rel, logDir) ||
			(strings.HasPrefix(rel, "sessions/") && !w.WithSessions) {
			continue
		}
		g.Go(func() error {
			rc, err := w.Store.Get(gctx, o.Key)
			if err != nil {
				return fmt.Errorf("read %s: %w", o.Key, err)
			}
			var r io.Reader = rc
			if rel == "result.json" && !w.WithSessions {
				if r, err = withoutPeople(rc); err != nil {
					_ = rc.Close()
					return fmt.Errorf("read %s: %w", o.Key, err)
				}
			}
			s, err := w.put(o.Key, r, nil)
			_ = rc.Close()
			if err != nil {
				return err
			}
			mu.Lock()
			out.add(s)
			mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}

// copyChunks copies the chunks of the manifests (as bundled) that the
// directory does not hold yet, checking each against its hash.
func (w *Writer) copyChunks(ctx context.Context, runID string, manifests []string, out *Written) error {
	need := map[string]bool{}
	for _, key := range manifests {
		m, err := w.manifest(key)
		if err != nil {
			return err
		}
		for _, f := range m.Files {
			for _, h := range f.Stored() {
				need[h] = true
			}
		}
	}
	w.mu.Lock()
	if w.chunks == nil {
		w.chunks = map[string]Subject{}
	}
	w.mu.Unlock()
	checkers := make(chan *checkpoint.ChunkChecker, max(1, w.Parallel))
	for range cap(checkers) {
		c, err := checkpoint.NewChunkChecker()
		if err != nil {
			return err
		}
		defer c.Close()
		checkers <- c
	}
	var fresh atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cap(checkers))
	for _, h := range slices.Sorted(maps.Keys(need)) {
		g.Go(func() error {
			c := <-checkers
			defer func() { checkers <- c }()
			s, wrote, err := w.chunk(gctx, c, h)
			if err != nil {
				return fmt.Errorf("%s: %w", runID, err)
			}
			if wrote {
				fresh.Add(1)
			}
			w.mu.Lock()
			out.add(s)
			w.mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	out.Chunks, out.NewChunks = len(need), int(fresh.Load())
	return nil
}

// manifest reads a bundled manifest back.
func (w *Writer) manifest(key string) (*checkpoint.Manifest, error) {
	f, err := os.Open(filepath.Join(w.Dir, filepath.FromSlash(key)))
	if err != nil {
		return nil, fmt.Errorf("bundled manifest: %w", err)
	}
	defer func() { _ = f.Close() }()
	m, err := checkpoint.DecodeManifest(f)
	if err != nil {
		return nil, fmt.Errorf("bundled manifest %s: %w", key, err)
	}
	return m, nil
}

// chunk puts chunk h in the directory unless it holds it, checked, and
// says whether it wrote it.
func (w *Writer) chunk(ctx context.Context, c *checkpoint.ChunkChecker, h string) (Subject, bool, error) {
	key := checkpoint.ChunkKey(h)
	w.mu.Lock()
	s, ok := w.chunks[h]
	w.mu.Unlock()
	if ok {
		return s, false, nil
	}
	if f, err := os.Open(filepath.Join(w.Dir, filepath.FromSlash(key))); err == nil {
		sum := sha256.New()
		n, err := c.Check(io.TeeReader(w.counting(f), sum), h)
		_ = f.Close()
		if err == nil {
			s = Subject{Name: key, SHA256: hex.EncodeToString(sum.Sum(nil)), Size: n}
			w.remember(h, s)
			return s, false, nil
		}
		// A chunk torn by an earlier bundle's crash is written again.
	}
	rc, err := w.Store.Get(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return s, false, fmt.Errorf("chunk %s is missing from the store %s", h, w.Store)
	}
	if err != nil {
		return s, false, fmt.Errorf("read chunk %s: %w", h, err)
	}
	defer func() { _ = rc.Close() }()
	s, err = w.put(key, rc, func(r io.Reader) error {
		_, err := c.Check(r, h)
		return err
	})
	if err != nil {
		return s, false, fmt.Errorf("chunk %s in the store %s: %w", h, w.Store, err)
	}
	w.remember(h, s)
	return s, true, nil
}

func (w *Writer) remember(h string, s Subject) {
	w.mu.Lock()
	w.chunks[h] = s
	w.mu.Unlock()
}

// put writes r under key in the directory (a temp file renamed into
// place: never a partial file under its name), hashing it as it goes;
// check, if set, reads the same bytes and may refuse them.
func (w *Writer) put(key string, r io.Reader, check func(io.Reader) error) (Subject, error) {
	s := Subject{Name: key}
	p := filepath.Join(w.Dir, filepath.FromSlash(key))
	if !filepath.IsLocal(filepath.FromSlash(key)) {
		return s, fmt.Errorf("key %q is not a relative path", key)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return s, fmt.Errorf("bundle %s: %w", key, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return s, fmt.Errorf("bundle %s: %w", key, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	sum := sha256.New()
	src := io.TeeReader(w.counting(r), io.MultiWriter(tmp, sum))
	if check != nil {
		err = check(src)
	} else {
		_, err = io.Copy(io.Discard, src)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return s, fmt.Errorf("bundle %s: %w", key, err)
	}
	st, err := os.Stat(tmp.Name())
	if err != nil {
		return s, fmt.Errorf("bundle %s: %w", key, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return s, fmt.Errorf("bundle %s: %w", key, err)
	}
	s.SHA256, s.Size = hex.EncodeToString(sum.Sum(nil)), st.Size()
	return s, nil
}

func (w *Writer) counting(r io.Reader) io.Reader {
	if w.Progress == nil {
		return r
	}
	return progressReader{r, w.Progress}
}

type progressReader struct {
	r  io.Reader
	fn func(int64)
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.fn(int64(n))
	return n, err
}

// writeMeta writes the bundle's own files: the task spec, the agent, the
// evaluator and the signer's public key.
func (w *Writer) writeMeta(ctx context.Context, in Input, out *Written) error {
	pub, err := w.Signer.PublicPEM()
	if err != nil {
		return err
	}
	files := []struct {
		name string
		v    any
	}{{TaskFile, in.Task}, {AgentFile, in.Agent}, {EvaluatorFile, in.Evaluator}, {SignerFile, pub}}
	for _, f := range files {
		b, ok := f.v.([]byte)
		if !ok {
			if b, err = json.MarshalIndent(f.v, "", "  "); err != nil {
				return fmt.Errorf("encode %s: %w", f.name, err)
			}
		}
		s, err := w.put(path.Join(MetaDir(in.RunID), f.name), strings.NewReader(string(b)), nil)
		if err != nil {
			return err
		}
		out.add(s)
	}
	return ctx.Err()
}

// seal signs the statement over every file of the run's bundle.
func (w *Writer) seal(ctx context.Context, in Input, out *Written) error {
	slices.SortFunc(out.Subjects, func(a, b Subject) int { return strings.Compare(a.Name, b.Name) })
	res, err := os.ReadFile(filepath.Join(w.Dir, filepath.FromSlash(keys.Result(in.RunID))))
	if err != nil {
		return fmt.Errorf("%s has no stored result: %w", in.RunID, err)
	}
	p := in.Predicate
	p.RunID, p.Final, p.Marks, p.Store = in.RunID, in.Final, in.Marks, w.Store.String()
	p.BundledAt, p.Result, p.WithSessions = time.Now().UTC().Format(time.RFC3339Nano), res, w.WithSessions
	for _, s := range out.Subjects {
		if v, ok := strings.CutPrefix(s.Name, keys.Reviews(in.RunID)); ok {
			p.Verdict = v // sorted: the last is the latest
		}
	}
	stmt, err := statement(out.Subjects, &p)
	if err != nil {
		return err
	}
	env, err := sign(ctx, w.Signer, stmt)
	if err != nil {
		return err
	}
	p2 := filepath.Join(w.Dir, filepath.FromSlash(EnvelopeKey(in.RunID)))
	if err := os.WriteFile(p2+".tmp", env, 0o644); err != nil {
		return fmt.Errorf("write envelope: %w", err)
	}
	if err := os.Rename(p2+".tmp", p2); err != nil {
		return fmt.Errorf("write envelope: %w", err)
	}
	return w.log(ctx, &p, env)
}

func (o *Written) add(s Subject) {
	o.Subjects = append(o.Subjects, s)
	o.Bytes += s.Size
}
