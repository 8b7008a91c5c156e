// Overlay reads through Upper to Lower and writes to Upper only.

package blob

import (
	"context"
	"errors"
	"io"
	"sort"
)

// Overlay reads through Upper to Lower and writes to Upper only: a store
// that must not change (a run bundle being re-scored) under one of the
// reader's own, where what the reading writes (logs, results) lands.
type Overlay struct{ Upper, Lower Store }

// Put writes to Upper.
func (o *Overlay) Put(ctx context.Context, key string, r io.Reader) error {
	return o.Upper.Put(ctx, key, r)
}

// Create creates in Upper, refused when either store has the key.
func (o *Overlay) Create(ctx context.Context, key string, r io.Reader) error {
	if ok, err := o.Lower.Exists(ctx, key); err != nil || ok {
		if err == nil {
			err = ErrExists
		}
		return err
	}
	return o.Upper.Create(ctx, key, r)
}

// Get reads Upper's blob, else Lower's.
func (o *Overlay) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := o.Upper.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return o.Lower.Get(ctx, key)
	}
	return rc, err
}

// Exists tells whether either store has the key.
func (o *Overlay) Exists(ctx context.Context, key string) (bool, error) {
	if ok, err := o.Upper.Exists(ctx, key); err != nil || ok {
		return ok, err
	}
	return o.Lower.Exists(ctx, key)
}

// List merges both stores' listings, Upper's object where both have one.
func (o *Overlay) List(ctx context.Context, prefix string) ([]Object, error) {
	up, err := o.Upper.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	low, err := o.Lower.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(up))
	for _, ob := range up {
		seen[ob.Key] = true
	}
	for _, ob := range low {
		if !seen[ob.Key] {
			up = append(up, ob)
		}
	}
	sort.Slice(up, func(i, j int) bool { return up[i].Key < up[j].Key })
	return up, nil
}

// Delete deletes from Upper; Lower never changes.
func (o *Overlay) Delete(ctx context.Context, key string) error { return o.Upper.Delete(ctx, key) }

// String names both.
func (o *Overlay) String() string { return o.Upper.String() + " over " + o.Lower.String() }
