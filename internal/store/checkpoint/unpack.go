// Packs on the restore side: grouped, read once, their files placed, and checked.

package checkpoint

import (
	"fmt"
	"io"
	"path"

	"github.com/mlrb/mlrb/internal/store/safefs"
)

// packGroup is a pack and the files of a manifest it holds: a pack is
// read once for all of them.
type packGroup struct {
	hash  string
	files []File
}

// groupPacks groups the packed files (not their hard links) by pack, in
// the order first met.
func groupPacks(files []File) []*packGroup {
	byHash := map[string]*packGroup{}
	var out []*packGroup
	for _, f := range files {
		if f.Pack == "" || f.HardLink != "" {
			continue
		}
		g, ok := byHash[f.Pack]
		if !ok {
			g = &packGroup{hash: f.Pack}
			byHash[f.Pack] = g
			out = append(out, g)
		}
		g.files = append(g.files, f)
	}
	return out
}

// inPack is f's bytes in its pack's content: a pack shorter than the
// files a manifest places in it is corrupt.
func inPack(f File, pack []byte) ([]byte, error) {
	if f.PackOffset < 0 || f.Size <= 0 || f.PackOffset > int64(len(pack))-f.Size {
		return nil, &CorruptChunkError{Hash: f.Pack, Reason: "shorter than the files the manifest places in it"}
	}
	return pack[f.PackOffset : f.PackOffset+f.Size], nil
}

// unpack fetches and verifies a pack, then writes each of its files in
// its directory (placing.go), each directory opened once.
func (r *restoring) unpack(g *packGroup) error {
	b := r.bufs.get()
	defer r.bufs.put(b)
	data, err := r.e.readChunk(r.ctx, g.hash, b)
	if err != nil {
		return err
	}
	dirs := map[string]*safefs.Dir{}
	defer func() {
		for _, d := range dirs {
			r.release(d)
		}
	}()
	for _, f := range g.files {
		content, err := inPack(f, data)
		if err != nil {
			return err
		}
		parent, name := path.Dir(f.Path), path.Base(f.Path)
		d, ok := dirs[parent]
		if !ok {
			if d, err = r.dir(parent); err != nil {
				return fmt.Errorf("%s: %w", f.Path, err)
			}
			dirs[parent] = d
		}
		if err := writeIn(d, name, f, content); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		report(r.ctx, f.Size)
	}
	return nil
}

// writeIn writes a whole file named name in d (placing.go).
func writeIn(d *safefs.Dir, name string, f File, data []byte) error {
	p, err := create(d, name, func() {})
	if err != nil {
		return err
	}
	if _, err := p.out.Write(data); err != nil {
		p.abandon()
		return err
	}
	return p.commit(f, false)
}

// CheckPacks checks, for each packed file of m, that its bytes in its
// pack hash to the content hash its entry names: what compares files by
// content trusts that name, and a manifest may come from someone else's
// bundle. open reads a stored chunk by key; each pack is read once.
func (m *Manifest) CheckPacks(open func(key string) (io.ReadCloser, error)) error {
	groups := groupPacks(m.Files)
	if len(groups) == 0 {
		return nil
	}
	b := newChunkBuf(m.ChunkSize)
	for _, g := range groups {
		rc, err := open(ChunkKey(g.hash))
		if err != nil {
			return fmt.Errorf("pack %.16s…: %w", g.hash, err)
		}
		data, err := decodeChunk(rc, g.hash, b)
		_ = rc.Close()
		if err != nil {
			return err
		}
		for _, f := range g.files {
			content, err := inPack(f, data)
			if err != nil {
				return err
			}
			if chunkHash(content) != f.Chunks[0] {
				return fmt.Errorf("%s: its bytes in pack %.16s… are not the content its entry names (%.16s…)", f.Path, g.hash, f.Chunks[0])
			}
		}
	}
	return nil
}
