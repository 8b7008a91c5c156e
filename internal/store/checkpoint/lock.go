// The store's lock protocol: a save's shared lock and GC's exclusive one, refreshed, gone stale when a holder crashed.

package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/store/keys"
)

// Locking: a save holds a shared lock object from its first chunk to its
// manifest; GC holds an exclusive one. Each writes its lock, then looks for
// the other kind: when both write at once both see each other, the save
// backs off and GC waits, so GC never runs beside a save that may dedup
// against a chunk GC is about to delete. A crashed holder's lock goes
// stale when it stops being refreshed.

// StaleLock is how old an unrefreshed lock must be to be ignored.
var StaleLock = 10 * time.Minute

type lockBody struct {
	Holder    string    `json:"holder"`
	Refreshed time.Time `json:"refreshed"`
}

type lock struct {
	e    *Engine
	key  string
	stop chan struct{}
	done chan struct{}
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (e *Engine) putLock(ctx context.Context, key, holder string) error {
	b, _ := json.Marshal(lockBody{Holder: holder, Refreshed: time.Now().UTC()})
	return e.Store.Put(ctx, key, bytes.NewReader(b))
}

// liveLocks lists the non-stale locks under prefix. Age is judged by the
// store's clock alone: against the time the store gave mine (the lock
// just written), never this host's clock, which may be far off the
// store's (an operator's laptop running `storage gc`).
func (e *Engine) liveLocks(ctx context.Context, prefix, mine string) ([]string, error) {
	objs, err := e.Store.List(ctx, lockPrefix)
	if err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	var now time.Time
	for _, o := range objs {
		if o.Key == mine {
			now = o.ModTime
		}
	}
	if now.IsZero() {
		return nil, fmt.Errorf("list locks: my lock %s is not listed", mine)
	}
	var live []string
	for _, o := range objs {
		if strings.HasPrefix(o.Key, prefix) && now.Sub(o.ModTime) < StaleLock {
			live = append(live, o.Key)
		}
	}
	return live, nil
}

// storeNow is the store's time: the modification time it gives an
// object written now.
func (e *Engine) storeNow(ctx context.Context) (time.Time, error) {
	key := keys.ClockLocks + newID()
	if err := e.Store.Put(ctx, key, strings.NewReader("")); err != nil {
		return time.Time{}, fmt.Errorf("read the store's clock: %w", err)
	}
	defer func() { _ = e.Store.Delete(context.WithoutCancel(ctx), key) }()
	objs, err := e.Store.List(ctx, key)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the store's clock: %w", err)
	}
	for _, o := range objs {
		if o.Key == key {
			return o.ModTime, nil
		}
	}
	return time.Time{}, fmt.Errorf("read the store's clock: %s is not listed", key)
}

// acquire takes a lock of one kind (mine) that excludes the other kind.
// With wait it keeps its lock and waits for the others to go (GC, so new
// saves hold off meanwhile); without, it withdraws and tries again (save).
func (e *Engine) acquire(ctx context.Context, mine, others, holder string, wait bool) (*lock, error) {
	key := mine + newID() + ".json"
	held := false
	for {
		if !held {
			if err := e.putLock(ctx, key, holder); err != nil {
				return nil, fmt.Errorf("take lock: %w", err)
			}
			held = true
		}
		live, err := e.liveLocks(ctx, others, key)
		if err == nil && len(live) == 0 {
			break
		}
		if err == nil && !wait {
			err = e.Store.Delete(ctx, key)
			held = false
		}
		if err != nil {
			_ = e.Store.Delete(context.WithoutCancel(ctx), key)
			return nil, err
		}
		select {
		case <-ctx.Done():
			_ = e.Store.Delete(context.WithoutCancel(ctx), key)
			return nil, fmt.Errorf("waiting for %s: %w", strings.Join(live, ", "), ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	l := &lock{e: e, key: key, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(StaleLock / 4)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				_ = e.putLock(context.Background(), key, holder)
			}
		}
	}()
	return l, nil
}

func (l *lock) release(ctx context.Context) {
	close(l.stop)
	<-l.done
	_ = l.e.Store.Delete(context.WithoutCancel(ctx), l.key)
}
