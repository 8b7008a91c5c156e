// ReadFile is the content of the regular file rel of m, read from its chunks or pack (each verified) without restoring anything to disk, if it is at.

package checkpoint

import (
	"context"
	"fmt"
)

// ReadFile is the content of the regular file rel of m, read from its
// chunks or pack (each verified) without restoring anything to disk, if it is
// at most limit bytes: a small file a caller must read before it knows
// what to restore (an agent's submission).
func (e *Engine) ReadFile(ctx context.Context, m *Manifest, rel string, limit int64) ([]byte, error) {
	var f *File
	for i := range m.Files {
		if m.Files[i].Path == rel {
			f = &m.Files[i]
			break
		}
	}
	if f != nil && f.HardLink != "" {
		target := f.HardLink
		f = nil
		for i := range m.Files {
			if m.Files[i].Path == target && m.Files[i].HardLink == "" {
				f = &m.Files[i]
				break
			}
		}
	}
	switch {
	case f == nil:
		return nil, fmt.Errorf("%s: not in checkpoint #%d", rel, m.Seq)
	case !f.Mode.IsRegular():
		return nil, fmt.Errorf("%s: not a regular file", rel)
	case f.Size > limit:
		return nil, fmt.Errorf("%s: %d bytes, over %d", rel, f.Size, limit)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	buf := newChunkBuf(m.ChunkSize)
	if f.Pack != "" {
		data, err := e.readChunk(ctx, f.Pack, buf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		content, err := inPack(*f, data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		return append([]byte(nil), content...), nil
	}
	out := make([]byte, 0, f.Size)
	for _, h := range f.Chunks {
		data, err := e.readChunk(ctx, h, buf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		out = append(out, data...)
	}
	if int64(len(out)) != f.Size {
		return nil, fmt.Errorf("%s: read %d bytes, the manifest says %d", rel, len(out), f.Size)
	}
	return out, nil
}
