package safefs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzExtractTar: any archive is extracted inside its directory or
// refused; never a panic, never a file outside, never a mode or a time
// set outside (through a link that replaced a directory entry).
func FuzzExtractTar(f *testing.F) {
	for _, entries := range [][]entry{
		{{name: "app/", flag: '5'}, {name: "app/a.txt", flag: '0', body: "a"}, {name: "app/b", link: "app/a.txt", flag: '1'}, {name: "app/c", link: "a.txt", flag: '2'}},
		{{name: "../x", flag: '0', body: "x"}},
		{{name: "a", link: "/", flag: '2'}, {name: "a/x", flag: '0', body: "x"}},
		{{name: "d/", flag: '5'}, {name: "d", link: "..", flag: '2'}},
	} {
		f.Add(archiveBytes(entries))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sandbox := t.TempDir()
		dir := filepath.Join(sandbox, "in")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		before, err := os.Stat(sandbox)
		if err != nil {
			t.Fatal(err)
		}
		_ = ExtractTar(bytes.NewReader(b), dir)
		// Nothing outside changes, its mode and time included.
		if after, err := os.Stat(sandbox); err != nil || after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
			t.Fatalf("extraction changed the directory above it: %v, %v", after, err)
		}
		entries, err := os.ReadDir(sandbox)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "in" {
				t.Fatalf("extraction wrote %s outside its directory", e.Name())
			}
		}
	})
}
