package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// packTree writes small files of many sizes (some alike, some with names
// of 255 bytes) and two that are too big to pack; it returns each file's
// content by its path in the snapshot.
func packTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	want := map[string][]byte{}
	put := func(rel string, b []byte, mode os.FileMode) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		writeFile(t, p, b)
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		want[rel] = b
	}
	for i := 0; i < 300; i++ {
		b := make([]byte, 1+r.IntN(50<<10))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if i%10 == 0 {
			b = []byte("the same small file")
		}
		put(fmt.Sprintf("runs/d%02d/f%03d.log", i%7, i), b, os.FileMode(0o600|r.IntN(2)*0o155))
	}
	long := strings.Repeat("n", 255)
	put("names/"+long, []byte("a small file with the longest name a file system allows"), 0o644)
	big := make([]byte, 600<<10)
	for j := range big {
		big[j] = byte(r.Uint32())
	}
	put("model/weights.bin", big, 0o644)
	put("model/"+long[:250]+".bin", big[:300<<10], 0o644)
	return want
}

func packStore(t *testing.T) blob.Store {
	t.Helper()
	store, err := blob.NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func checkRestored(t *testing.T, dir string, want map[string][]byte, m *Manifest) {
	t.Helper()
	for rel, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s restored as %d bytes (%v), want %d", rel, len(got), err, len(b))
		}
	}
	for _, f := range m.Files {
		if !f.Mode.IsRegular() {
			continue
		}
		st, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil || st.Mode() != f.Mode || st.ModTime().UnixNano() != f.MTime {
			t.Fatalf("%s restored with mode %v, mtime %v (%v); want %v, %v", f.Path, st.Mode(), st.ModTime(), err, f.Mode, time.Unix(0, f.MTime))
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".mlrb-") {
			t.Fatalf("a restore's private name is left: %s", e.Name())
		}
	}
}

// TestSmallFilesArePacked: small files share packs (a few stored objects,
// not one per file), each keeps the hash of its own content, and they
// restore byte for byte with their modes and times, read alone too.
func TestSmallFilesArePacked(t *testing.T) {
	ctx := context.Background()
	store := packStore(t)
	src := t.TempDir()
	want := packTree(t, src)
	e := New(store, Options{ChunkSize: 1 << 20})
	m, err := e.Save(ctx, src, Meta{RunID: "packs", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	packs := map[string]bool{}
	var small int64
	for _, f := range m.Files {
		if !f.Mode.IsRegular() {
			continue
		}
		if f.Size >= e.packMax() {
			if f.Pack != "" {
				t.Fatalf("%s (%d bytes) is packed", f.Path, f.Size)
			}
			continue
		}
		if f.Pack == "" || len(f.Chunks) != 1 || f.Chunks[0] != chunkHash(want[f.Path]) {
			t.Fatalf("%s: pack %q, chunks %v; want a pack and the hash of its content", f.Path, f.Pack, f.Chunks)
		}
		packs[f.Pack] = true
		small += f.Size
	}
	if most := small/int64(e.ChunkSize) + 2; int64(len(packs)) > most {
		t.Fatalf("%d small files (%d bytes) in %d packs; want at most %d", len(want)-2, small, len(packs), most)
	}
	objects, err := store.List(ctx, "chunks/")
	if err != nil || len(objects) != len(packs)+2 { // and the two big files, a chunk each
		t.Fatalf("the store holds %d chunks (%v); want %d packs and the big files' 2 chunks", len(objects), err, len(packs))
	}
	var enc bytes.Buffer
	if err := json.NewEncoder(&enc).Encode(m); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeManifest(&enc)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.CheckPacks(func(k string) (io.ReadCloser, error) { return store.Get(ctx, k) }); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := e.Restore(ctx, back, dst); err != nil {
		t.Fatal(err)
	}
	checkRestored(t, dst, want, back)
	rel := "names/" + strings.Repeat("n", 255)
	if b, err := e.ReadFile(ctx, back, rel, 1<<20); err != nil || !bytes.Equal(b, want[rel]) {
		t.Fatalf("ReadFile(%s) = %q, %v", rel, b, err)
	}
}

// TestPackedIncremental: a checkpoint after one small file changed and
// one was added stores one new pack; the others keep their places in the
// first checkpoint's packs, and both checkpoints restore whole.
func TestPackedIncremental(t *testing.T) {
	ctx := context.Background()
	store := packStore(t)
	src := t.TempDir()
	want := packTree(t, src)
	e := New(store, Options{ChunkSize: 1 << 20, RacyWindow: time.Nanosecond})
	m1, err := e.Save(ctx, src, Meta{RunID: "inc", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]File{}
	for _, f := range m1.Files {
		first[f.Path] = f
	}
	wantFirst := map[string][]byte{}
	for k, v := range want {
		wantFirst[k] = v
	}
	changed, added := "runs/d03/f003.log", "runs/d03/new.log"
	for rel, b := range map[string][]byte{changed: []byte("changed"), added: []byte("added")} {
		writeFile(t, filepath.Join(src, filepath.FromSlash(rel)), b)
		if err := os.Chmod(filepath.Join(src, filepath.FromSlash(rel)), 0o600); err != nil {
			t.Fatal(err)
		}
		want[rel] = b
	}
	m2, err := e.Save(ctx, src, Meta{RunID: "inc", Seq: 2}, m1)
	if err != nil {
		t.Fatal(err)
	}
	if m2.NewChunks != 1 {
		t.Fatalf("the incremental stored %d chunks; want one pack", m2.NewChunks)
	}
	for _, f := range m2.Files {
		o, had := first[f.Path]
		switch {
		case f.Path == changed || f.Path == added:
			if f.Pack == "" || f.Pack == o.Pack {
				t.Fatalf("%s: pack %q; want a new one", f.Path, f.Pack)
			}
		case had && (f.Pack != o.Pack || f.PackOffset != o.PackOffset):
			t.Fatalf("%s moved from %s@%d to %s@%d", f.Path, o.Pack, o.PackOffset, f.Pack, f.PackOffset)
		}
	}
	for _, c := range []struct {
		m    *Manifest
		want map[string][]byte
	}{{m1, wantFirst}, {m2, want}} {
		dst := t.TempDir()
		if err := e.Restore(ctx, c.m, dst); err != nil {
			t.Fatal(err)
		}
		checkRestored(t, dst, c.want, c.m)
	}
}

// TestPackDamage: a pack shorter than the files a manifest places in it
// is a corrupt chunk (a restore falls back), and a packed file whose
// entry names other content than its bytes is caught by CheckPacks.
func TestPackDamage(t *testing.T) {
	ctx := context.Background()
	store := packStore(t)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a"), []byte("first"))
	writeFile(t, filepath.Join(src, "b"), []byte("second"))
	e := New(store, Options{ChunkSize: 1 << 20})
	m, err := e.Save(ctx, src, Meta{RunID: "damage", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Files[0].Pack == "" || m.Files[0].Pack != m.Files[1].Pack {
		t.Fatalf("a and b are not in one pack: %+v", m.Files)
	}
	past := *m
	past.Files = []File{m.Files[0], m.Files[1]}
	past.Files[1].PackOffset = 1000
	var ce *CorruptChunkError
	if err := e.Restore(ctx, &past, t.TempDir()); !errors.As(err, &ce) || ce.Hash != m.Files[0].Pack {
		t.Fatalf("restore of a file past its pack's end = %v; want a CorruptChunkError", err)
	}
	if _, err := e.ReadFile(ctx, &past, "b", 100); !errors.As(err, &ce) {
		t.Fatalf("ReadFile of a file past its pack's end = %v; want a CorruptChunkError", err)
	}
	lying := *m
	lying.Files = []File{m.Files[0], m.Files[1]}
	lying.Files[1].Chunks = []string{chunkHash([]byte("other"))}
	if err := lying.CheckPacks(func(k string) (io.ReadCloser, error) { return store.Get(ctx, k) }); err == nil || !strings.Contains(err.Error(), "not the content") {
		t.Fatalf("CheckPacks of a lying entry = %v", err)
	}
}

// TestDecodeRefusesBadChunkNames: a chunk or pack that is no hash (it
// becomes a store key) and a packed file outside any pack are refused.
func TestDecodeRefusesBadChunkNames(t *testing.T) {
	h := strings.Repeat("0f", 32)
	for name, f := range map[string]File{
		"short chunk":      {Path: "x", Mode: 0o644, Size: 1, Chunks: []string{"a"}},
		"not hex":          {Path: "x", Mode: 0o644, Size: 1, Chunks: []string{strings.Repeat("zz", 32)}},
		"bad pack":         {Path: "x", Mode: 0o644, Size: 1, Chunks: []string{h}, Pack: "../x"},
		"past the pack":    {Path: "x", Mode: 0o644, Size: 10, Chunks: []string{h}, Pack: h, PackOffset: 1<<20 - 5},
		"negative offset":  {Path: "x", Mode: 0o644, Size: 10, Chunks: []string{h}, Pack: h, PackOffset: -1},
		"two chunks":       {Path: "x", Mode: 0o644, Size: 10, Chunks: []string{h, h}, Pack: h},
		"nothing, packed?": {Path: "x", Mode: 0o644, Chunks: []string{h}, Pack: h},
	} {
		b, _ := json.Marshal(Manifest{Version: 3, ChunkSize: 1 << 20, Files: []File{f}})
		if _, err := DecodeManifest(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "files[0]") {
			t.Errorf("%s: decode = %v; want a refusal naming files[0]", name, err)
		}
	}
}

// TestPackedFileNeverWrittenThroughASymlink: a crafted manifest places a
// packed file in directory "a", then makes "a" a symlink to a host dir
// (the restore removes the empty directory to make the link). The file
// is written through a descriptor opened with no symlink on the way:
// refused, and nothing lands in the host dir.
func TestPackedFileNeverWrittenThroughASymlink(t *testing.T) {
	ctx := context.Background()
	store := packStore(t)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "evil"), []byte("payload"))
	e := New(store, Options{ChunkSize: 1 << 20})
	m, err := e.Save(ctx, src, Meta{RunID: "crafted", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir()
	file := m.Files[0]
	file.Path = "a/evil"
	m.Files = []File{file, {Path: "a", Mode: os.ModeSymlink | 0o777, Link: hostDir}}
	if err := e.Restore(ctx, m, t.TempDir()); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("restore = %v; want a refusal", err)
	}
	if entries, _ := os.ReadDir(hostDir); len(entries) != 0 {
		t.Fatalf("the restore wrote into the host dir: %v", entries)
	}
}

// TestRestoredTreeIsNotReadAgain: a restored workspace keeps every file's
// mtime to the nanosecond, so the new attempt's first checkpoint reads
// none of its files again (a microsecond's rounding had it re-read and
// re-pack the whole workspace after every resume).
func TestRestoredTreeIsNotReadAgain(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	packTree(t, src)
	e := New(packStore(t), Options{ChunkSize: 1 << 20, RacyWindow: time.Nanosecond})
	m1, err := e.Save(ctx, src, Meta{RunID: "resume", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := e.Restore(ctx, m1, dst); err != nil {
		t.Fatal(err)
	}
	var read []string
	e.readHook = func(path string, _ int) { read = append(read, path) }
	m2, err := e.Save(ctx, dst, Meta{RunID: "resume", Seq: 2}, m1)
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != 0 || m2.NewChunks != 0 {
		t.Fatalf("the first checkpoint after a restore read %d files again (%.3q) and stored %d chunks", len(read), read, m2.NewChunks)
	}
}

// TestOnlyCopiesAPackedLink: a hard link in the directory restored alone
// to a small file outside it comes back as that file's bytes, read from
// its pack.
func TestOnlyCopiesAPackedLink(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a", "tokenizer.model"), []byte("a small file, linked"))
	writeFile(t, filepath.Join(src, "z", "other"), []byte("not restored"))
	if err := os.MkdirAll(filepath.Join(src, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(src, "a", "tokenizer.model"), filepath.Join(src, "m", "tokenizer.model")); err != nil {
		t.Fatal(err)
	}
	e := New(packStore(t), Options{ChunkSize: 1 << 20})
	m, err := e.Save(ctx, src, Meta{RunID: "only", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := e.Restore(ctx, m.Only("m"), dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "m", "tokenizer.model")); err != nil || string(b) != "a small file, linked" {
		t.Fatalf("the linked file restored as %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "z")); err == nil {
		t.Fatal("a directory outside the one asked for was restored")
	}
}

// TestPackedContentIsStoredOnce: small files of the same content share
// one place in a pack, and a checkpoint after every small file was
// touched (read again, the same bytes) or renamed stores nothing new.
func TestPackedContentIsStoredOnce(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	want := packTree(t, src)
	e := New(packStore(t), Options{ChunkSize: 1 << 20, RacyWindow: time.Nanosecond})
	m1, err := e.Save(ctx, src, Meta{RunID: "once", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	places := map[string]bool{}
	for _, f := range m1.Files {
		if string(want[f.Path]) == "the same small file" {
			places[fmt.Sprintf("%s@%d", f.Pack, f.PackOffset)] = true
		}
	}
	if len(places) != 1 {
		t.Fatalf("30 files of the same content are kept in %d places; want 1", len(places))
	}
	later := time.Now().Add(time.Hour)
	for rel := range want {
		if err := os.Chtimes(filepath.Join(src, filepath.FromSlash(rel)), later, later); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(filepath.Join(src, "runs", "d01", "f001.log"), filepath.Join(src, "runs", "d01", "renamed.log")); err != nil {
		t.Fatal(err)
	}
	m2, err := e.Save(ctx, src, Meta{RunID: "once", Seq: 2}, m1)
	if err != nil {
		t.Fatal(err)
	}
	if m2.NewChunks != 0 {
		t.Fatalf("after touching and renaming, the checkpoint stored %d chunks (%d bytes); want none", m2.NewChunks, m2.NewBytes)
	}
	want["runs/d01/renamed.log"] = want["runs/d01/f001.log"]
	delete(want, "runs/d01/f001.log")
	dst := t.TempDir()
	if err := e.Restore(ctx, m2, dst); err != nil {
		t.Fatal(err)
	}
	checkRestored(t, dst, want, m2)
}

// TestNoPacks: with packing off (checkpoint.pack_small_files: false,
// while older workers may restore), every file has chunks of its own,
// the manifest is version 2, and a file a packing checkpoint had packed
// is stored on its own again.
func TestNoPacks(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	want := packTree(t, src)
	store := packStore(t)
	m1, err := New(store, Options{ChunkSize: 1 << 20}).Save(ctx, src, Meta{RunID: "nopacks", Seq: 1}, nil)
	if err != nil || m1.Version != 3 {
		t.Fatalf("packing save: version %d, %v", m1.Version, err)
	}
	e := New(store, Options{ChunkSize: 1 << 20, NoPacks: true})
	m2, err := e.Save(ctx, src, Meta{RunID: "nopacks", Seq: 2}, m1)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Version != 2 {
		t.Fatalf("version %d; want 2", m2.Version)
	}
	for _, f := range m2.Files {
		if f.Pack != "" {
			t.Fatalf("%s is packed", f.Path)
		}
		if f.Mode.IsRegular() && f.Size > 0 {
			if ok, err := store.Exists(ctx, ChunkKey(f.Chunks[0])); err != nil || !ok {
				t.Fatalf("%s: its chunk is not stored (%v)", f.Path, err)
			}
		}
	}
	dst := t.TempDir()
	if err := e.Restore(ctx, m2, dst); err != nil {
		t.Fatal(err)
	}
	checkRestored(t, dst, want, m2)
}

// TestTornSmallFileNeverPacked: a small file rewritten during every read
// is left out and named unsettled, never packed torn; one rewritten once
// is read again and packed as it then is.
func TestTornSmallFileNeverPacked(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		rewrites int
		want     string // "": unsettled
	}{{rewrites: 100}, {rewrites: 1, want: "version 1"}} {
		src := t.TempDir()
		p := filepath.Join(src, "train.log")
		writeFile(t, p, []byte("v0"))
		e := New(packStore(t), Options{ChunkSize: 1 << 20})
		n := 0
		e.readHook = func(path string, _ int) {
			if path == "train.log" && n < c.rewrites {
				n++
				writeFile(t, p, []byte(fmt.Sprintf("version %d", n)))
			}
		}
		m, err := e.Save(ctx, src, Meta{RunID: "torn", Seq: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for _, f := range m.Files {
			if f.Path == "train.log" {
				e.readHook = nil
				if got, err = e.ReadFile(ctx, m, f.Path, 100); err != nil {
					t.Fatal(err)
				}
			}
		}
		if string(got) != c.want || (c.want == "") != (len(m.Unsettled) == 1) {
			t.Fatalf("rewritten %d times: saved %q, unsettled %v; want %q", c.rewrites, got, m.Unsettled, c.want)
		}
	}
}

// TestRestoreIntoALinkedDirectory: the directory a caller restores into
// may itself be a symlink (`starter checkpoint restore RUN DIR`, DIR on
// a scratch disk); only what lies below it is never followed.
func TestRestoreIntoALinkedDirectory(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	want := packTree(t, src)
	e := New(packStore(t), Options{ChunkSize: 1 << 20})
	m, err := e.Save(ctx, src, Meta{RunID: "linked", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "out")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := e.Restore(ctx, m, link); err != nil {
		t.Fatal(err)
	}
	checkRestored(t, real, want, m)
}

// TestChunkedFileNeverWrittenThroughASymlink: as for a packed file, a
// file of its own chunks placed in "a" before "a" becomes a symlink to
// a host dir is never written there.
func TestChunkedFileNeverWrittenThroughASymlink(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "evil"), bytes.Repeat([]byte("payload "), 64<<10))
	e := New(packStore(t), Options{ChunkSize: 1 << 20})
	m, err := e.Save(ctx, src, Meta{RunID: "crafted", Seq: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hostDir := t.TempDir()
	file := m.Files[0]
	if file.Pack != "" {
		t.Fatal("the file is packed; this test needs one of its own chunks")
	}
	file.Path = "a/evil"
	m.Files = []File{file, {Path: "a", Mode: os.ModeSymlink | 0o777, Link: hostDir}}
	if err := e.Restore(ctx, m, t.TempDir()); err == nil {
		t.Fatal("a manifest making a directory with a file in it a symlink was restored")
	}
	if entries, _ := os.ReadDir(hostDir); len(entries) != 0 {
		t.Fatalf("the restore wrote into the host dir: %v", entries)
	}
}

// TestDecodeRefusesANewerVersion: a manifest of a version this build
// does not know is refused by name, never read with parts taken for
// missing chunks.
func TestDecodeRefusesANewerVersion(t *testing.T) {
	b, _ := json.Marshal(Manifest{Version: versionPacks + 1, ChunkSize: 1 << 20})
	if _, err := DecodeManifest(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("decode of a newer manifest = %v; want a refusal saying to upgrade", err)
	}
}
