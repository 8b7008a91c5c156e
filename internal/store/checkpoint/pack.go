// Packs: small files saved in one chunk, and unpacked on restore.

package checkpoint

import (
	"errors"
	"os"

	"github.com/cespare/xxhash/v2"
)

// Small files are packed. A workspace's thousands of logs, configs and
// scripts would each cost the store a request, a PUT on every save and a
// GET on every restore, and on such a workspace the requests (the
// store's CPU more than ours) are what a checkpoint costs, not the bytes.
// Files under packMax go, in walk order, into packs of up to a chunk's
// size, each stored as a chunk: named by its BLAKE3, compressed, verified
// whole when read. A packed file's entry keeps the hash of its own
// content in Chunks, as for a file of one chunk, so that what compares
// files by content (review flags, research observations) reads the same.
// A pack is written once and only ever referenced: an unchanged file
// keeps its place in an older pack, as it kept its chunk, and so does a
// file read again whose content a packed file of the previous checkpoint
// or of this one already has (touched, renamed, copied): a small file's
// bytes are stored again only by another run.

// packMax is the size from which a file is not packed: what its own
// chunk would ask the store for first (askFirst), and a quarter of a
// chunk at most so that a pack holds several.
func (e *Engine) packMax() int64 {
	if e.NoPacks {
		return 0
	}
	return int64(min(askFirst, e.ChunkSize/4))
}

// maxPackFiles bounds the files of one pack: a restore writes them one
// after the other.
const maxPackFiles = 1024

// errNotSmall: the file grew past packMax (or to nothing) while it was
// read; it is read as a file of its own.
var errNotSmall = errors.New("no longer a small file")

// openPack is the pack being filled, in one of the engine's buffers; sp
// is what it is once sealed.
type openPack struct {
	b  *chunkBuf
	n  int64
	sp *sealedPack
}

// packMember is a packed file: its entry in the manifest and its offset.
type packMember struct {
	index int
	off   int64
}

// sealedPack is a pack of this save and the entries placed in it; hash
// is set once it is hashed, before the save's group is done.
type sealedPack struct {
	members []packMember
	hash    string
}

// packPlace is where a small file's content lies, from off: in a pack of
// this save (sp), or in one of the previous checkpoint (pack).
type packPlace struct {
	sp   *sealedPack
	pack string
	off  int64
}

// room makes the open pack able to take size more bytes, sealing the
// full one.
func (s *saving) room(size int64) {
	if s.pack != nil && (s.pack.n+size > int64(s.e.ChunkSize) || len(s.pack.sp.members) >= maxPackFiles) {
		s.seal()
	}
	if s.pack == nil {
		s.pack = &openPack{b: s.e.bufs.get(), sp: &sealedPack{}}
	}
}

// packFile reads a small open file into the open pack, as saveFile reads
// a larger one: again while it changes, ErrTorn after three tries. It
// returns the content's hash with the size and mtime it was read at; the
// bytes are the pack's once claim takes them.
func (s *saving) packFile(fh *os.File, size, mtime int64) (string, int64, int64, error) {
	var buf []byte
	size, mtime, err := s.e.settle(fh, size, mtime, func(size int64, racy bool) (bool, error) {
		if size <= 0 || size >= s.e.packMax() {
			return false, errNotSmall
		}
		s.room(size)
		buf = s.pack.b.data[s.pack.n : s.pack.n+size]
		same, err := readWhole(fh, buf)
		if s.e.readHook != nil {
			s.e.readHook(fh.Name(), 0)
		}
		if err != nil || !same || !racy {
			return same, err
		}
		sum := xxhash.Sum64(buf)
		again, err := readWhole(fh, buf)
		return again && xxhash.Sum64(buf) == sum, err
	})
	if err != nil {
		return "", size, mtime, err
	}
	report(s.ctx, size)
	return chunkHash(buf), size, mtime, nil
}

// placeSmall says where a small file just read into the open pack (its
// content hash h) is kept: where a packed file of the previous
// checkpoint (still stored) or of this save has the same content, else
// where it was read, in the open pack.
func (s *saving) placeSmall(h string) *packPlace {
	if pl, ok := s.packed[h]; ok && (pl.sp != nil || s.stillStored([]string{pl.pack})) {
		return pl
	}
	pl := &packPlace{sp: s.pack.sp, off: s.pack.n}
	s.packed[h] = pl
	return pl
}

// place gives the manifest's last entry its place; the bytes just read
// become the open pack's when they are kept where they were read.
func (s *saving) place(pl *packPlace, size int64) {
	f := &s.m.Files[len(s.m.Files)-1]
	if pl.sp == nil {
		f.Pack, f.PackOffset = pl.pack, pl.off
		return
	}
	pl.sp.members = append(pl.sp.members, packMember{index: len(s.m.Files) - 1, off: pl.off})
	if pl.sp == s.pack.sp && pl.off == s.pack.n {
		s.pack.n += size
	}
}

// seal queues the open pack's upload (a conditional write: a pack is
// new but for a save retried with the same files).
func (s *saving) seal() {
	p := s.pack
	s.pack = nil
	if p == nil {
		return
	}
	if p.n == 0 {
		s.e.bufs.put(p.b)
		return
	}
	sp := p.sp
	s.packs = append(s.packs, sp)
	data := p.b.data[:p.n]
	s.g.Go(func() error {
		defer s.e.bufs.put(p.b)
		sp.hash = chunkHash(data)
		put, err := s.e.putChunk(s.ctx, sp.hash, data, p.b, false)
		if err == nil && put {
			s.newBytes.Add(int64(len(data)))
			s.newChunks.Add(1)
		}
		return err
	})
}

// placePacked writes each packed file's pack into its entry, once every
// pack is hashed. A manifest with packed files is version 3: a worker
// older than packs would find their content missing.
func (s *saving) placePacked() {
	for _, sp := range s.packs {
		for _, m := range sp.members {
			s.m.Files[m.index].Pack, s.m.Files[m.index].PackOffset = sp.hash, m.off
		}
	}
	for _, f := range s.m.Files {
		if f.Pack != "" {
			s.m.Version = versionPacks
			return
		}
	}
}
