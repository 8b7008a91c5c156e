// A manifest narrowed to some entries.

package checkpoint

import (
	"path"
	"slices"
	"strings"
)

// Only is m narrowed to the entries rels (a directory: with everything
// below it) and the directories above them: what a restore needs to lay
// out those alone, its bytes recounted. A hard link in rel to a file in
// rel stays a link; one to a file outside becomes a copy of that file
// (its chunks or pack place), which is not restored. Nil when no rel is in m.
func (m *Manifest) Only(rels ...string) *Manifest {
	rels = slices.Clone(rels)
	above := map[string]bool{}
	for i, rel := range rels {
		rels[i] = path.Clean(rel)
		for p := path.Dir(rels[i]); p != "." && p != "/"; p = path.Dir(p) {
			above[p] = true
		}
	}
	inside := func(p string) bool {
		for _, rel := range rels {
			if p == rel || strings.HasPrefix(p, rel+"/") {
				return true
			}
		}
		return false
	}
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
				f.HardLink = ""
				f.sameContent(t)
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
