// Which bundle of a run is the latest: the run's bundle log.

package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/keys"
)

// A signature proves who signed a bundle, not that it is the run's
// current one: a bundle made before a `hacked` verdict still verifies.
// So each bundle made is logged in the operator's store beside the run
// (runs/<run>/bundles/<time>.json: when, the envelope's SHA-256, the
// latest verdict it holds), and verify, given that store, says when the
// run was bundled again since, or has a verdict the bundle lacks.

// logDir is where a run's bundles are logged, under its prefix.
const logDir = "bundles/"

// Logged is one bundle made of a run.
type Logged struct {
	BundledAt string `json:"bundled_at"`
	Envelope  string `json:"envelope_sha256"`
	Verdict   string `json:"latest_verdict,omitempty"`
}

// log records the bundle just sealed in the operator's store.
func (w *Writer) log(ctx context.Context, p *Predicate, env []byte) error {
	sum := sha256.Sum256(env)
	b, err := json.Marshal(Logged{BundledAt: p.BundledAt, Envelope: hex.EncodeToString(sum[:]), Verdict: p.Verdict})
	if err != nil {
		return fmt.Errorf("log the bundle: %w", err)
	}
	at, err := time.Parse(time.RFC3339Nano, p.BundledAt)
	if err != nil {
		return fmt.Errorf("log the bundle: %w", err)
	}
	key := keys.BundleEntry(p.RunID, at)
	if err := w.Store.Put(ctx, key, bytes.NewReader(b)); err != nil {
		return fmt.Errorf("log the bundle in %s: %w", w.Store, err)
	}
	return nil
}

// Stale says how a verified bundle is not its run's current record in
// store (none: it is): a bundle of the run made later, or a verdict on
// the run later than the bundle's latest.
func Stale(ctx context.Context, store blob.Store, c *Checked) ([]string, error) {
	var why []string
	prefix := blob.RunPrefix(c.RunID)
	logged, err := store.List(ctx, prefix+logDir)
	if err != nil {
		return nil, fmt.Errorf("bundles of %s: %w", c.RunID, err)
	}
	if n := len(logged); n > 0 {
		b, err := blob.ReadAll(ctx, store, logged[n-1].Key, 1<<20)
		var l Logged
		if err == nil {
			err = json.Unmarshal(b, &l)
		}
		if err != nil {
			return nil, fmt.Errorf("bundles of %s: %w", c.RunID, err)
		}
		if later(l.BundledAt, c.Predicate.BundledAt) {
			why = append(why, fmt.Sprintf("the run was bundled again at %s (envelope sha256 %.16s…): this bundle, of %s, is not its current one", l.BundledAt, l.Envelope, c.Predicate.BundledAt))
		}
	}
	verdicts, err := store.List(ctx, prefix+"review/")
	if err != nil {
		return nil, fmt.Errorf("verdicts on %s: %w", c.RunID, err)
	}
	for i := len(verdicts) - 1; i >= 0; i-- {
		name := path.Base(verdicts[i].Key)
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		if name > c.Predicate.Verdict {
			why = append(why, fmt.Sprintf("the run has a verdict newer than the bundle's (%s, in the store's review/): `starter review` shows it", name))
		}
		break
	}
	return why, nil
}

// later tells whether RFC 3339 time a is after b (b unreadable: yes).
func later(a, b string) bool {
	ta, err := time.Parse(time.RFC3339Nano, a)
	if err != nil {
		return false
	}
	tb, err := time.Parse(time.RFC3339Nano, b)
	return err != nil || ta.After(tb)
}
