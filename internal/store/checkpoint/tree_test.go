package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/internal/store/blob"
)

// attackManifest is audit C1's manifest: a payload file, a hard link
// below a directory and a symlink of the directory's name that leads to
// victim, in the order given (the escape worked with the link first).
func attackManifest(t *testing.T, e *Engine, ws, victim string, linkFirst bool) *Manifest {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(ws, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "m", "r"), []byte("echo pwned-by-bundle\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := e.Save(context.Background(), ws, Meta{RunID: "r", Seq: 1, Attempt: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(filepath.Join(ws, "m"), victim)
	if err != nil {
		t.Fatal(err)
	}
	link := File{Path: "m/p/.bashrc", Mode: 0o644, HardLink: "m/r"}
	sym := File{Path: "m/p", Mode: fs.ModeSymlink | 0o777, Link: rel}
	if linkFirst {
		m.Files = append(m.Files, link, sym)
	} else {
		m.Files = append(m.Files, sym, link)
	}
	return m
}

// TestRestoreNeverPlacesThroughALink (audit C1a): a manifest that puts
// a hard link below a symlink of its own is refused where it is decoded
// and by the restore, in either order, and the file the symlink reaches
// is never touched.
func TestRestoreNeverPlacesThroughALink(t *testing.T) {
	for _, linkFirst := range []bool{true, false} {
		home := t.TempDir()
		victim := filepath.Join(home, ".bashrc")
		if err := os.WriteFile(victim, []byte("# mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		store, _ := blob.NewFS(t.TempDir())
		e := New(store, Options{})
		m := attackManifest(t, e, t.TempDir(), home, linkFirst)
		b, _ := json.Marshal(m)
		if _, err := DecodeManifest(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "which is a symlink, not a directory") {
			t.Fatalf("decode (link first %v): %v", linkFirst, err)
		}
		dst := filepath.Join(home, "state", "restore")
		if err := e.Restore(context.Background(), m, dst); err == nil {
			t.Fatalf("restore (link first %v) took the manifest", linkFirst)
		}
		if got, _ := os.ReadFile(victim); string(got) != "# mine\n" {
			t.Fatalf("the victim now holds %q", got)
		}
	}
}

// TestManifestIsOneTree: every shape no save makes is refused at decode,
// naming the entry.
func TestManifestIsOneTree(t *testing.T) {
	reg := func(p string) File { return File{Path: p, Mode: 0o644} }
	dir := func(p string) File { return File{Path: p, Mode: fs.ModeDir | 0o755} }
	for name, c := range map[string]struct {
		files []File
		want  string
	}{
		"twice":               {[]File{reg("a"), reg("a")}, "listed twice"},
		"below a file":        {[]File{reg("a"), reg("a/b")}, "which is a regular file"},
		"below a symlink":     {[]File{{Path: "a", Mode: fs.ModeSymlink, Link: "/"}, dir("a/b")}, "which is a symlink"},
		"deep below a link":   {[]File{dir("a"), {Path: "a/b", Mode: fs.ModeSymlink, Link: ".."}, reg("a/b/c/d")}, "lies below \"a/b\""},
		"link to nothing":     {[]File{{Path: "a", Mode: 0o644, HardLink: "b"}}, "no regular file"},
		"link to a directory": {[]File{dir("d"), {Path: "a", Mode: 0o644, HardLink: "d"}}, "no regular file"},
		"link to itself":      {[]File{{Path: "a", Mode: 0o644, HardLink: "a"}}, "no regular file"},
		"link to a link":      {[]File{reg("a"), {Path: "b", Mode: 0o644, HardLink: "a"}, {Path: "c", Mode: 0o644, HardLink: "b"}}, "itself a hard link"},
		"a directory linked":  {[]File{reg("a"), {Path: "b", Mode: fs.ModeDir, HardLink: "a"}}, "not a regular file"},
		"unclean":             {[]File{reg("a/../b")}, "unsafe path"},
		"outside":             {[]File{reg("../b")}, "unsafe path"},
		"absolute":            {[]File{reg("/etc/passwd")}, "unsafe path"},
		"the root":            {[]File{dir(".")}, "unsafe path"},
	} {
		b, _ := json.Marshal(&Manifest{Version: versionPacks, ChunkSize: 1 << 20, Files: c.files})
		if _, err := DecodeManifest(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	for _, w := range []string{"../..", "/app", "a/../../b"} {
		b, _ := json.Marshal(&Manifest{Version: versionPacks, ChunkSize: 1 << 20, Workdir: w})
		if _, err := DecodeManifest(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "workdir") {
			t.Errorf("workdir %q: %v", w, err)
		}
	}
	ok := []File{dir("a"), reg("a/x"), {Path: "a/y", Mode: 0o644, HardLink: "a/x"}, {Path: "l", Mode: fs.ModeSymlink, Link: "a"}}
	b, _ := json.Marshal(&Manifest{Version: versionPacks, ChunkSize: 1 << 20, Files: ok})
	if _, err := DecodeManifest(bytes.NewReader(b)); err != nil {
		t.Fatalf("a tree a save makes: %v", err)
	}
}

// TestRestorePlacesLinksAndModes: hard links, symlinks and a read-only
// directory come back as saved, over a restore dir that already holds
// files of those names.
func TestRestorePlacesLinksAndModes(t *testing.T) {
	ws := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(ws, "ro", "in"), 0o755))
	must(os.WriteFile(filepath.Join(ws, "ro", "in", "w"), []byte("weights"), 0o644))
	must(os.Link(filepath.Join(ws, "ro", "in", "w"), filepath.Join(ws, "second")))
	must(os.Symlink("ro/in/w", filepath.Join(ws, "sym")))
	must(os.Chmod(filepath.Join(ws, "ro"), 0o555))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(ws, "ro"), 0o755) })
	store, _ := blob.NewFS(t.TempDir())
	e := New(store, Options{})
	m, err := e.Save(context.Background(), ws, Meta{RunID: "r", Seq: 1, Attempt: 1}, nil)
	must(err)
	dst := t.TempDir()
	must(os.WriteFile(filepath.Join(dst, "second"), []byte("old"), 0o644))
	must(os.WriteFile(filepath.Join(dst, "sym"), []byte("old"), 0o644))
	must(e.Restore(context.Background(), m, dst))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dst, "ro"), 0o755) })
	a, _ := os.Stat(filepath.Join(dst, "ro", "in", "w"))
	b, _ := os.Stat(filepath.Join(dst, "second"))
	if !os.SameFile(a, b) {
		t.Fatal("the hard link came back as another file")
	}
	if l, err := os.Readlink(filepath.Join(dst, "sym")); err != nil || l != "ro/in/w" {
		t.Fatalf("symlink: %q %v", l, err)
	}
	if st, _ := os.Stat(filepath.Join(dst, "ro")); st.Mode().Perm() != 0o555 {
		t.Fatalf("ro: mode %v", st.Mode())
	}
}

// TestTornHardLinkStaysRestorable (audit M5): a hard link whose first
// name is gone, rewritten without pause while the next checkpoint is
// taken, is kept at its previous content under its own name: the
// checkpoint commits whole and restores.
func TestTornHardLinkStaysRestorable(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	for _, d := range []string{"d1", "d2"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	first := bytes.Repeat([]byte{1}, 1<<20)
	if err := os.WriteFile(filepath.Join(ws, "d1", "z"), first, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(ws, "d1", "z"), filepath.Join(ws, "d2", "a")); err != nil {
		t.Fatal(err)
	}
	store, _ := blob.NewFS(t.TempDir())
	e := New(store, Options{ChunkSize: 64 << 10})
	m1, err := e.Save(ctx, ws, Meta{RunID: "r", Seq: 1, Attempt: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "d1", "z")); err != nil {
		t.Fatal(err)
	}
	v := byte(2)
	e.readHook = func(rel string, chunk int) {
		if chunk == 0 {
			v++
			_ = os.WriteFile(filepath.Join(ws, rel), bytes.Repeat([]byte{v}, 1<<20), 0o644)
		}
	}
	if _, err := e.Save(ctx, ws, Meta{RunID: "r", Seq: 2, Attempt: 1}, m1); err != nil {
		t.Fatal(err)
	}
	m2, err := e.Load(ctx, "r", 2)
	if err != nil {
		t.Fatalf("checkpoint #2 does not load: %v", err)
	}
	if len(m2.Unsettled) != 1 || m2.Unsettled[0] != "d2/a" || m2.Truncated {
		t.Fatalf("checkpoint #2: unsettled %v, truncated %v (want d2/a torn, the checkpoint whole)", m2.Unsettled, m2.Truncated)
	}
	dst := t.TempDir()
	if err := e.Restore(ctx, m2, dst); err != nil {
		t.Fatalf("checkpoint #2 does not restore: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "d2", "a")); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("d2/a: %v, %d bytes (want its previous content)", err, len(got))
	}
}
