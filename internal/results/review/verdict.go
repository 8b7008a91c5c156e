// Verdicts kept under the run: who, when, why.

package review

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/mlrb/mlrb/internal/run/runs"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/keys"
)

// Verdicts are kept one object each, never replaced: a run's review
// history is every verdict given, the latest the one that counts.
//
//	runs/<run>/review/<unix nanos>.json

func prefix(runID string) string { return keys.Reviews(runID) }

// Key is where a verdict given at v.At is kept.
func Key(runID string, v *runs.Verdict) string {
	return keys.Review(runID, v.At)
}

// Put keeps a verdict.
func Put(ctx context.Context, store blob.Store, runID string, v *runs.Verdict) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode verdict: %w", err)
	}
	if err := store.Create(ctx, Key(runID, v), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("keep the verdict on %s: %w", runID, err)
	}
	return nil
}

// maxVerdict bounds a verdict read back (a note is a paragraph).
const maxVerdict = 1 << 20

// Latest is the run's latest verdict (nil: none given).
func Latest(ctx context.Context, store blob.Store, runID string) (*runs.Verdict, error) {
	objs, err := store.List(ctx, prefix(runID))
	if err != nil {
		return nil, fmt.Errorf("verdicts on %s: %w", runID, err)
	}
	for i := len(objs) - 1; i >= 0; i-- {
		if !strings.HasSuffix(objs[i].Key, ".json") {
			continue
		}
		rc, err := store.Get(ctx, objs[i].Key)
		if err != nil {
			return nil, fmt.Errorf("verdict %s: %w", objs[i].Key, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, maxVerdict))
		_ = rc.Close()
		if err != nil {
			return nil, fmt.Errorf("verdict %s: %w", objs[i].Key, err)
		}
		var v runs.Verdict
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("verdict %s: %w", objs[i].Key, err)
		}
		return &v, nil
	}
	return nil, nil
}
