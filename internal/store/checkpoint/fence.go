// Attempt fences: a later attempt's save refuses an earlier one's.

package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// A fence is written by each attempt of a run before its agent starts:
// from then on the attempt owns the run's checkpoints. An earlier attempt
// still running somewhere (a zombie: its worker cut off from Temporal,
// its agent alive) is refused at commit, and whatever it committed after
// the checkpoint the new attempt started from is superseded: never the
// latest, never restored, never evaluated.
type Fence struct {
	Attempt int `json:"attempt"`
	// FromSeq is the checkpoint the attempt started from (0: none). An
	// earlier attempt's checkpoints up to it are the run's; later ones
	// were written by a zombie.
	FromSeq int       `json:"from_seq"`
	At      time.Time `json:"at"`
}

// FencedError: the attempt committing was superseded by a later one.
type FencedError struct{ Attempt, By int }

func (e *FencedError) Error() string {
	return fmt.Sprintf("attempt %d is superseded by attempt %d: it commits nothing", e.Attempt, e.By)
}

// ErrSuperseded is a checkpoint a zombie attempt wrote after a later
// attempt had taken the run over.
var ErrSuperseded = errors.New("written by a superseded attempt")

// Fence makes attempt the owner of the run's checkpoints, starting from
// checkpoint fromSeq. The same attempt may fence again (a retried start).
func (e *Engine) Fence(ctx context.Context, runID string, attempt, fromSeq int) error {
	fs, err := e.fences(ctx, runID)
	if err != nil {
		return err
	}
	if by := supersededBy(attempt, 0, fs); by != nil {
		return &FencedError{Attempt: attempt, By: by.Attempt}
	}
	body, err := json.Marshal(Fence{Attempt: attempt, FromSeq: fromSeq, At: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("fence %s: %w", runID, err)
	}
	if err := e.Store.Put(ctx, fenceKey(runID, attempt), bytes.NewReader(body)); err != nil {
		return fmt.Errorf("fence %s attempt %d: %w", runID, attempt, err)
	}
	return nil
}

// fences are the run's fences, by attempt.
func (e *Engine) fences(ctx context.Context, runID string) ([]Fence, error) {
	objs, err := e.Store.List(ctx, fencePrefix(runID))
	if err != nil {
		return nil, fmt.Errorf("fences of %s: %w", runID, err)
	}
	out := make([]Fence, 0, len(objs))
	for _, o := range objs {
		rc, err := e.Store.Get(ctx, o.Key)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("fences of %s: %w", runID, err)
		}
		var f Fence
		err = json.NewDecoder(rc).Decode(&f)
		_ = rc.Close()
		if err != nil {
			return nil, fmt.Errorf("fence %s: %w", o.Key, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// supersededBy is the fence that makes checkpoint seq of attempt a
// zombie's (seq 0: any further commit of the attempt), or nil.
func supersededBy(attempt, seq int, fs []Fence) *Fence {
	for i := range fs {
		if fs[i].Attempt > attempt && (seq == 0 || seq > fs[i].FromSeq) {
			return &fs[i]
		}
	}
	return nil
}

// LastAttempt is the last attempt that fenced the run (0: none).
func (e *Engine) LastAttempt(ctx context.Context, runID string) (int, error) {
	fs, err := e.fences(ctx, runID)
	if err != nil {
		return 0, err
	}
	last := 0
	for _, f := range fs {
		last = max(last, f.Attempt)
	}
	return last, nil
}
