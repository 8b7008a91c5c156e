package checkpoint

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// TarSource is one archive stream; Prefix is prepended to its entry
// names (Docker names the entries of /root/.cache/huggingface
// "huggingface/…", so its prefix is "root/.cache").
type TarSource struct {
	Prefix string
	R      io.Reader
}

// SaveTar snapshots tar streams, as Docker's archive API returns a
// container's paths. Entries whose size, mtime and mode match prev reuse
// its chunks (their bytes are skipped, not hashed); the rest are chunked
// like files. Paths are stored without a leading slash.
func (e *Engine) SaveTar(ctx context.Context, streams []TarSource, meta Meta, prev *Manifest) (*Manifest, error) {
	return e.save(ctx, meta, prev, "container archive", func(s *saving) error {
		seen := map[string]bool{}
		for _, src := range streams {
			tr := tar.NewReader(src.R)
			for {
				hdr, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return fmt.Errorf("read archive: %w", err)
				}
				p := strings.TrimPrefix(path.Clean("/"+src.Prefix+"/"+hdr.Name), "/")
				if p == "" || seen[p] {
					continue
				}
				seen[p] = true
				f := File{Path: p, Mode: hdr.FileInfo().Mode()}
				switch hdr.Typeflag {
				case tar.TypeDir:
				case tar.TypeSymlink:
					f.Link = hdr.Linkname
				case tar.TypeReg:
					f.Size, f.MTime = hdr.Size, hdr.ModTime.UnixNano()
					var ok bool
					if f.Chunks, ok = s.unchanged(f); ok {
						// Skipped, not hashed: the bytes must still be read off the stream.
						if _, err := io.Copy(io.Discard, tr); err != nil {
							return fmt.Errorf("%s: %w", p, err)
						}
						break
					}
					if f.Chunks, err = s.streamChunks(tr, hdr.Size); err != nil {
						return fmt.Errorf("%s: %w", p, err)
					}
				default:
					continue // hard links, devices, fifos: not workspace content
				}
				s.add(f)
			}
		}
		return nil
	})
}

// streamChunks cuts a stream into chunks and queues each for storing.
func (s *saving) streamChunks(r io.Reader, size int64) ([]string, error) {
	cs := int64(s.e.ChunkSize)
	chunks := make([]string, int((size+cs-1)/cs))
	for i := range chunks {
		bp := s.e.getBuf()
		buf := (*bp)[:min(cs, size-int64(i)*cs)]
		if _, err := io.ReadFull(r, buf); err != nil {
			s.e.bufs.Put(bp)
			return nil, err
		}
		s.g.Go(func() error { return s.store(bp, buf, chunks, i, nil) })
		if s.ctx.Err() != nil {
			return nil, s.ctx.Err()
		}
	}
	return chunks, nil
}
