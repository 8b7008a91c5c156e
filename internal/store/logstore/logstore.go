// Agent logs shipped to the store as they grow.

// Package logstore ships an agent's log file to the blob store in
// segments, per run and attempt, so the log outlives the host it was
// written on; and reads the segments back.
package logstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/keys"
)

func prefix(runID string, attempt int) string {
	return keys.AttemptLogs(runID, attempt)
}

// Shipper uploads what a log file gained since the last call.
type Shipper struct {
	Store   blob.Store
	RunID   string
	Attempt int
	Path    string
	offset  int64
}

// Ship uploads the new bytes as one segment named by its offset. Only
// whole lines go out, so a segment never splits a line (and a secret
// redacted line by line is never cut in two).
func (s *Shipper) Ship(ctx context.Context, final bool) error {
	f, err := os.Open(s.Path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("ship log: %w", err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(s.offset, io.SeekStart); err != nil {
		return fmt.Errorf("ship log: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return fmt.Errorf("ship log: %w", err)
	}
	if !final {
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		} else {
			b = nil
		}
	}
	if len(b) == 0 {
		return nil
	}
	key := fmt.Sprintf("%s%012d.log", prefix(s.RunID, s.Attempt), s.offset)
	if err := s.Store.Put(ctx, key, bytes.NewReader(b)); err != nil {
		return fmt.Errorf("ship log: %w", err)
	}
	s.offset += int64(len(b))
	return nil
}

// Attempts lists the attempts that have log segments.
func Attempts(ctx context.Context, store blob.Store, runID string) ([]int, error) {
	objs, err := store.List(ctx, keys.Logs(runID))
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	var out []int
	for _, o := range objs {
		dir := path.Base(path.Dir(o.Key))
		n, err := strconv.Atoi(strings.TrimPrefix(dir, "attempt-"))
		if err == nil && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

// Copy writes an attempt's log from byte offset from on; it returns the
// offset reached, for following.
func Copy(ctx context.Context, store blob.Store, runID string, attempt int, from int64, w io.Writer) (int64, error) {
	objs, err := store.List(ctx, prefix(runID, attempt))
	if err != nil {
		return from, err
	}
	for _, o := range objs {
		off, err := strconv.ParseInt(strings.TrimSuffix(path.Base(o.Key), ".log"), 10, 64)
		if err != nil || off < from {
			continue
		}
		rc, err := store.Get(ctx, o.Key)
		if err != nil {
			return from, err
		}
		n, err := io.Copy(w, rc)
		_ = rc.Close()
		if err != nil {
			return from, err
		}
		from = off + n
	}
	return from, nil
}

// Tail returns the last n bytes of an attempt's log, reading only the
// segments that hold them (a 24 h log may be a gigabyte), and whether an
// earlier part was left out.
func Tail(ctx context.Context, store blob.Store, runID string, attempt int, n int64) ([]byte, bool, error) {
	objs, err := store.List(ctx, prefix(runID, attempt))
	if err != nil {
		return nil, false, err
	}
	type segment struct {
		key       string
		off, size int64
	}
	var segs []segment
	var total int64
	for _, o := range objs {
		off, err := strconv.ParseInt(strings.TrimSuffix(path.Base(o.Key), ".log"), 10, 64)
		if err != nil {
			continue
		}
		segs = append(segs, segment{o.Key, off, o.Size})
		total = max(total, off+o.Size)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].off < segs[j].off })
	from := max(0, total-n)
	var buf bytes.Buffer
	for _, s := range segs {
		if s.off+s.size <= from {
			continue
		}
		rc, err := store.Get(ctx, s.key)
		if err != nil {
			return buf.Bytes(), from > 0, err
		}
		if skip := from - s.off; skip > 0 {
			_, err = io.CopyN(io.Discard, rc, skip)
		}
		if err == nil {
			_, err = io.Copy(&buf, rc)
		}
		_ = rc.Close()
		if err != nil {
			return buf.Bytes(), from > 0, err
		}
	}
	return buf.Bytes(), from > 0, nil
}
