package checkpoint

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sys/unix"

	"github.com/mlrb/mlrb/internal/store/safefs"
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

// packPlace is where a small file's content lies: in a pack of this save
// (sp) or of an earlier checkpoint (hash, in prev).
type packPlace struct {
	sp   *sealedPack
	prev *File
	off  int64
	// fresh: the bytes are the open pack's next ones, read just now.
	fresh bool
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
	for try := 0; try < 3; try++ {
		if size <= 0 || size >= s.e.packMax() {
			return "", size, mtime, errNotSmall
		}
		s.room(size)
		buf := s.pack.b.data[s.pack.n : s.pack.n+size]
		check := s.e.racy(time.Unix(0, mtime), time.Now())
		same, err := readWhole(fh, buf)
		if s.e.readHook != nil {
			s.e.readHook(fh.Name(), 0)
		}
		if err == nil && same && check {
			// As in saveFile: a change in the same clock tick moves no mtime.
			sum := xxhash.Sum64(buf)
			same, err = readWhole(fh, buf)
			same = same && xxhash.Sum64(buf) == sum
		}
		if err != nil {
			return "", 0, 0, err
		}
		var after unix.Stat_t
		if err := unix.Fstat(int(fh.Fd()), &after); err != nil {
			return "", 0, 0, err
		}
		if same && after.Size == size && after.Mtim.Nano() == mtime {
			report(s.ctx, size)
			return chunkHash(buf), size, mtime, nil
		}
		size, mtime = after.Size, after.Mtim.Nano()
	}
	return "", 0, 0, ErrTorn
}

// placeSmall says where a small file just read into the open pack (its
// content hash h) is kept: where a packed file of the previous
// checkpoint or of this save has the same content, else in the open pack.
func (s *saving) placeSmall(h string, size int64) *packPlace {
	if o, ok := s.prevPacked[h]; ok && o.Size == size && s.stillStored(*o) {
		return &packPlace{prev: o}
	}
	if pl, ok := s.packed[h]; ok {
		return pl
	}
	pl := &packPlace{sp: s.pack.sp, off: s.pack.n, fresh: true}
	s.packed[h] = &packPlace{sp: pl.sp, off: pl.off}
	return pl
}

// place gives the manifest's last entry its place: a fresh one takes
// the open pack's next size bytes.
func (s *saving) place(pl *packPlace, size int64) {
	f := &s.m.Files[len(s.m.Files)-1]
	if pl.sp == nil {
		f.Pack, f.PackOffset = pl.prev.Pack, pl.prev.PackOffset
		return
	}
	pl.sp.members = append(pl.sp.members, packMember{index: len(s.m.Files) - 1, off: pl.off})
	if pl.fresh {
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
			s.m.Version = 3
			return
		}
	}
}

// packGroup is a pack a restore fetches, and the files it holds there.
type packGroup struct {
	hash  string
	files []File
}

// packed queues a packed file under its pack's group; a pack is
// fetched once for all of them.
func (r *restoring) packed(f File) {
	g, ok := r.packs[f.Pack]
	if !ok {
		g = &packGroup{hash: f.Pack}
		r.packs[f.Pack] = g
		r.packOrder = append(r.packOrder, g)
	}
	g.files = append(g.files, f)
}

// unpack fetches and verifies a pack, then writes each of its files.
// Each is created in its directory's descriptor, opened from the
// restore's root with no symlink on the way: a symlink the checkpoint
// holds, restored meanwhile, never redirects a write.
func (r *restoring) unpack(root *safefs.Dir, g *packGroup) error {
	b := r.bufs.get()
	defer r.bufs.put(b)
	data, err := r.e.readChunk(r.ctx, g.hash, b)
	if err != nil {
		return err
	}
	dirs := map[string]*safefs.Dir{".": root}
	defer func() {
		for rel, d := range dirs {
			if rel != "." {
				_ = d.Close()
			}
		}
	}()
	for _, f := range g.files {
		if f.PackOffset < 0 || f.Size <= 0 || f.PackOffset > int64(len(data))-f.Size {
			return &CorruptChunkError{Hash: g.hash, Reason: "shorter than the files the manifest places in it"}
		}
		parent, name := path.Dir(f.Path), path.Base(f.Path)
		d, ok := dirs[parent]
		if !ok {
			if d, err = root.SubPath(parent); err != nil {
				return fmt.Errorf("%s: %w", f.Path, err)
			}
			dirs[parent] = d
		}
		if err := writeIn(d, name, f, data[f.PackOffset:f.PackOffset+f.Size]); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		report(r.ctx, f.Size)
	}
	return nil
}

// writeIn writes a whole file named name in d under a private name, sets
// its mode and times, and renames it into place.
func writeIn(d *safefs.Dir, name string, f File, data []byte) error {
	tmp := tempName()
	fd, err := unix.Openat(d.Fd(), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: tmp, Err: err}
	}
	out := os.NewFile(uintptr(fd), tmp)
	_, err = out.Write(data)
	if err == nil {
		err = out.Chmod(f.Mode.Perm())
	}
	if err == nil {
		err = setMTime(fd, f.MTime)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(d.Fd(), tmp, d.Fd(), name)
	}
	if err != nil {
		_ = unix.Unlinkat(d.Fd(), tmp, 0)
	}
	return err
}

// tempName is a name no one can predict, of a fixed length: a file
// restored under a name of 255 bytes (NAME_MAX) is written under this
// one first.
func tempName() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return ".mlrb-" + hex.EncodeToString(b[:])
}

// CheckPacks checks, for each packed file of m, that its bytes in its
// pack hash to the content hash its entry names: what compares files by
// content trusts that name, and a manifest may come from someone else's
// bundle. open reads a stored chunk by key; each pack is read once.
func (m *Manifest) CheckPacks(open func(key string) (io.ReadCloser, error)) error {
	byPack := map[string][]File{}
	var order []string
	for _, f := range m.Files {
		if f.Pack == "" || f.HardLink != "" {
			continue
		}
		if _, ok := byPack[f.Pack]; !ok {
			order = append(order, f.Pack)
		}
		byPack[f.Pack] = append(byPack[f.Pack], f)
	}
	if len(order) == 0 {
		return nil
	}
	b := newChunkBuf(m.ChunkSize)
	for _, h := range order {
		rc, err := open(ChunkKey(h))
		if err != nil {
			return fmt.Errorf("pack %.16s…: %w", h, err)
		}
		b.comp.Reset()
		_, err = b.comp.ReadFrom(io.LimitReader(rc, maxStoredChunk+1))
		_ = rc.Close()
		if err != nil {
			return fmt.Errorf("pack %.16s…: %w", h, err)
		}
		data, err := decoder.DecodeAll(b.comp.Bytes(), b.data[:0])
		if err != nil || chunkHash(data) != h {
			return &CorruptChunkError{Hash: h, Reason: "corrupt (hash mismatch)"}
		}
		for _, f := range byPack[h] {
			if f.PackOffset < 0 || f.PackOffset > int64(len(data))-f.Size {
				return &CorruptChunkError{Hash: h, Reason: "shorter than the files the manifest places in it"}
			}
			if chunkHash(data[f.PackOffset:f.PackOffset+f.Size]) != f.Chunks[0] {
				return fmt.Errorf("%s: its bytes in pack %.16s… are not the content its entry names (%.16s…)", f.Path, h, f.Chunks[0])
			}
		}
	}
	return nil
}
