package safefs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzExtractTar: any archive is extracted inside its directory or
// refused; never a panic, never a file outside.
func FuzzExtractTar(f *testing.F) {
	for _, entries := range [][]entry{
		{{name: "app/", flag: '5'}, {name: "app/a.txt", flag: '0', body: "a"}, {name: "app/b", link: "app/a.txt", flag: '1'}, {name: "app/c", link: "a.txt", flag: '2'}},
		{{name: "../x", flag: '0', body: "x"}},
		{{name: "a", link: "/", flag: '2'}, {name: "a/x", flag: '0', body: "x"}},
	} {
		f.Add(archiveBytes(entries))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sandbox := t.TempDir()
		dir := filepath.Join(sandbox, "in")
		_ = ExtractTar(bytes.NewReader(b), dir)
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
