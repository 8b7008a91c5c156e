package safefs

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type entry struct {
	name, link string
	flag       byte
	body       string
}

func archive(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	return bytes.NewBuffer(archiveBytes(entries))
}

// archiveBytes writes entries as a tar stream (flags as tar's: '0' file,
// '1' hardlink, '2' symlink, '5' dir).
func archiveBytes(entries []entry) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.flag, Mode: 0o644, Size: int64(len(e.body))}
		if e.flag == tar.TypeDir {
			h.Mode = 0o755
		}
		if e.flag != tar.TypeReg {
			h.Size = 0
		}
		if tw.WriteHeader(h) != nil {
			return nil
		}
		if e.flag == tar.TypeReg {
			_, _ = tw.Write([]byte(e.body))
		}
	}
	_ = tw.Close()
	return b.Bytes()
}

func TestExtractTarKeepsLinks(t *testing.T) {
	dir := t.TempDir()
	err := ExtractTar(archive(t,
		entry{name: "app/", flag: tar.TypeDir},
		entry{name: "app/ckpt/model.bin", flag: tar.TypeReg, body: "weights"},
		entry{name: "app/output/model.bin", link: "app/ckpt/model.bin", flag: tar.TypeLink},
		entry{name: "app/latest", link: "ckpt", flag: tar.TypeSymlink},
	), dir)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(filepath.Join(dir, "app/ckpt/model.bin"))
	b, _ := os.Stat(filepath.Join(dir, "app/output/model.bin"))
	if a == nil || b == nil || !os.SameFile(a, b) {
		t.Fatal("the hardlink was not kept")
	}
	if l, err := os.Readlink(filepath.Join(dir, "app/latest")); err != nil || l != "ckpt" {
		t.Fatalf("symlink %q, %v", l, err)
	}
}

// TestExtractTarRefusesEscapes: entries that climb out, absolute names,
// a hardlink to a file outside, and a write below a symlink to a host
// dir are each refused, and nothing lands outside.
func TestExtractTarRefusesEscapes(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "passwd"), []byte("root:x:0:0"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, entries := range map[string][]entry{
		"climbing":         {{name: "../../evil", flag: tar.TypeReg, body: "x"}},
		"absolute":         {{name: filepath.Join(host, "evil"), flag: tar.TypeReg, body: "x"}},
		"hardlink outside": {{name: "stolen", link: "../../../../../../" + strings.TrimPrefix(filepath.Join(host, "passwd"), "/"), flag: tar.TypeLink}},
		"below a symlink":  {{name: "a", link: host, flag: tar.TypeSymlink}, {name: "a/evil", flag: tar.TypeReg, body: "x"}},
		// Audit C1's order: a link made below a directory that a symlink
		// then takes the place of; no directory is ever removed for one.
		"a symlink over a directory": {{name: "m/r", flag: tar.TypeReg, body: "x"}, {name: "m/p/evil", link: "m/r", flag: tar.TypeLink},
			{name: "m/p", link: host, flag: tar.TypeSymlink}, {name: "m/p/evil2", link: "m/r", flag: tar.TypeLink}},
		"a symlink over an empty directory": {{name: "m/p/", flag: tar.TypeDir}, {name: "m/p", link: host, flag: tar.TypeSymlink},
			{name: "m/p/evil", flag: tar.TypeReg, body: "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "root", "app")
			if err := ExtractTar(archive(t, entries...), dir); err == nil {
				t.Fatal("extracted without complaint")
			}
			got, _ := os.ReadDir(host)
			if len(got) != 1 {
				t.Fatalf("the host dir holds %v", got)
			}
			if b, _ := os.ReadFile(filepath.Join(host, "passwd")); string(b) != "root:x:0:0" {
				t.Fatal("a host file changed")
			}
		})
	}
}

// TestExtractTarSetsNoModeThroughALink: a directory entry, then a symlink
// of the same name to a directory outside: the directory's mode and time,
// set last, are never set through the link (the fuzzer's archive of that
// shape once turned the machine's / to 0644 and its time to 1970).
func TestExtractTarSetsNoModeThroughALink(t *testing.T) {
	victim := t.TempDir()
	if err := os.Chmod(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "in")
	_ = ExtractTar(archive(t, entry{name: "x/", flag: '5'}, entry{name: "x", link: victim, flag: '2'}), dir)
	after, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	if after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("a directory outside changed through the link: %v %v, was %v %v", after.Mode(), after.ModTime(), before.Mode(), before.ModTime())
	}
}
