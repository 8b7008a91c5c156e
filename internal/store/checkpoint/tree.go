// checkTree refuses a manifest that is not one tree a save could have walked, before anything reads it.

package checkpoint

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// checkTree refuses a manifest that is not one tree a save could have
// walked, before anything reads it: a restore, a verify and a rescore
// refuse the same things. Every path is clean and inside the root, none
// is listed twice, nothing lies below an entry that is not a directory
// (a symlink, above all: a restore would write through it), and a hard
// link names a regular file of the same checkpoint.
func (m *Manifest) checkTree() error {
	if w := m.Workdir; w != "" && (path.Clean(w) != w || path.IsAbs(w) || w == ".." || strings.HasPrefix(w, "../")) {
		return fmt.Errorf("workdir %.80q is not a clean path inside the workspace", w)
	}
	at := make(map[string]int, len(m.Files))
	for i := range m.Files {
		f := &m.Files[i]
		p := f.Path
		if p == "" || p == "." || path.Clean(p) != p || path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
			return fmt.Errorf("files[%d]: unsafe path %.80q (not a clean path inside the workspace)", i, p)
		}
		if _, dup := at[p]; dup {
			return fmt.Errorf("files[%d]: %.80q is listed twice", i, p)
		}
		at[p] = i
	}
	for i := range m.Files {
		f := &m.Files[i]
		for j := strings.IndexByte(f.Path, '/'); j >= 0; j = next(f.Path, j) {
			if a, ok := at[f.Path[:j]]; ok && !m.Files[a].Mode.IsDir() {
				return fmt.Errorf("files[%d]: %.80q lies below %.80q, which is a %s, not a directory: refused", i, f.Path, f.Path[:j], kindName(m.Files[a].Mode.Type()))
			}
		}
		if f.HardLink == "" {
			continue
		}
		a, ok := at[f.HardLink]
		switch {
		case !f.Mode.IsRegular():
			return fmt.Errorf("files[%d]: %.80q is a hard link but not a regular file", i, f.Path)
		case !ok || !m.Files[a].Mode.IsRegular() || a == i:
			return fmt.Errorf("files[%d]: %.80q links to %.80q, which is no regular file of the checkpoint", i, f.Path, f.HardLink)
		case m.Files[a].HardLink != "":
			return fmt.Errorf("files[%d]: %.80q links to %.80q, itself a hard link (a save names an inode's first name)", i, f.Path, f.HardLink)
		}
	}
	return nil
}

// next is the index of the next '/' in p after j (-1: none).
func next(p string, j int) int {
	k := strings.IndexByte(p[j+1:], '/')
	if k < 0 {
		return -1
	}
	return j + 1 + k
}

func kindName(k fs.FileMode) string {
	switch {
	case k == 0:
		return "regular file"
	case k&fs.ModeSymlink != 0:
		return "symlink"
	}
	return k.String()
}

// dropDangling leaves out every hard link whose first name this
// checkpoint does not hold as a regular file (it was torn with no earlier
// version, or is gone), and marks the checkpoint incomplete: a committed
// checkpoint always restores, and one the agent made unrestorable fails
// its attempt now, as the agent's doing, never a later resume.
func (s *saving) dropDangling() {
	regular := map[string]bool{}
	for i := range s.m.Files {
		if f := &s.m.Files[i]; f.Mode.IsRegular() && f.HardLink == "" {
			regular[f.Path] = true
		}
	}
	kept := s.m.Files[:0]
	for _, f := range s.m.Files {
		if f.HardLink != "" && !regular[f.HardLink] {
			s.incomplete(fmt.Sprintf("%.80s is a hard link to %.80s, which changed without pause or went while it was read: the checkpoint could not hold both names", f.Path, f.HardLink))
			continue
		}
		kept = append(kept, f)
	}
	s.m.Files = kept
}
