package checkpoint

import (
	"path"
	"strings"
)

// Only is m narrowed to the entry rel (a directory: with everything
// below it) and the directories above it: what a restore needs to lay
// out rel alone, its bytes recounted. A hard link in rel to a file in
// rel stays a link; one to a file outside becomes a copy of that file
// (its chunks), which is not restored. Nil when rel is not in m.
func (m *Manifest) Only(rel string) *Manifest {
	rel = path.Clean(rel)
	above := map[string]bool{}
	for p := path.Dir(rel); p != "." && p != "/"; p = path.Dir(p) {
		above[p] = true
	}
	inside := func(p string) bool { return p == rel || strings.HasPrefix(p, rel+"/") }
	out := *m
	out.Files, out.Bytes, out.RawNames = nil, 0, nil
	files := map[string]File{}
	for _, f := range m.Files {
		if f.Mode.IsRegular() && f.HardLink == "" {
			files[f.Path] = f
		}
	}
	found := false
	for _, f := range m.Files {
		switch {
		case inside(f.Path):
			if f.HardLink != "" && !inside(f.HardLink) {
				t, ok := files[f.HardLink]
				if !ok {
					continue
				}
				f.HardLink, f.Size, f.Chunks = "", t.Size, t.Chunks
			}
			found = true
			out.Files = append(out.Files, f)
			if f.Mode.IsRegular() && f.HardLink == "" {
				out.Bytes += f.Size
			}
		case above[f.Path] && f.Mode.IsDir():
			out.Files = append(out.Files, f)
		}
	}
	if !found {
		return nil
	}
	return &out
}
